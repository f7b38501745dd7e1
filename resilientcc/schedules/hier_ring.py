"""OptCC's hierarchical ring: the pipelined hierarchical schedule with rings between servers.

The pipelined hierarchical schedule (:mod:`~resilientcc.schedules.hier_pipeline`) crosses
the network in one hop: every server sends its partial of every shard straight to the
shard's owner. Its transfers and concurrent flows grow as ``N²`` per NIC, and on 16
servers it measured 6.97 ms (1 GiB, 2 or 4 of 8 NICs lost on one server, 32 pieces,
2.4 million transfers, ten minutes to simulate). Here the healthy servers instead run,
for each rail's part of each piece, a ring reduce-scatter and a ring all-gather among
themselves (NCCL's hierarchical ring, one flow per NIC and direction), and the degraded
server ``d`` is *decoupled*: it owns no shard of the rings, sends its partial of every
shard straight to the shard's owner's server and gets the result straight back as soon
as the ring's reduce-scatter has ended there (and owns a sliver where it can, below).
Per piece:

1. **intra-server reduce-scatter** (ring over NVLink,
   :func:`~resilientcc.schedules.hier_pipeline.ring_order`): each rail's part ends, summed over the server, on the
   GPU of that rail (on ``d``: a GPU whose NIC is alive, see the classes below);
2. ``d`` **sends** each shard's partial to the owner's server on the rail of ``d``'s NIC,
   where it lands on a staging GPU (:func:`staging_gpu`, reached over NVLink from the
   NIC);
3. **ring reduce-scatter** among the healthy servers on the rail; after its last step
   the staging GPU folds ``d``'s partial into the owner over NVLink;
4. the owner **returns** the result to ``d``; **ring all-gather** among the healthy
   servers (its own connection, so the next piece's reduce-scatter is not queued behind);
5. **intra-server all-gather** (NVLink).

**The straggler's sliver** (``sliver``, default :func:`default_sliver`). Decoupled,
``d`` moves ``M`` each way and a healthy server ``(2N_h − 1)/N_h · M``: where ``d`` keeps
more than ``β* = N_h/(2N_h − 1)`` of a healthy server's bandwidth, its NICs then idle
part of the time while every healthy NIC carries more than the bound needs (16 × 8 GPUs,
1 NIC lost: 1.933 · M, 1.023 × the bound). ``d`` therefore owns a part ``w`` of every
class of every piece (a chunk of its own, beside the owners' shards), exchanged in one
hop: every owner sends its server's partial of it to ``d`` and gets the result back.
``w`` makes ``d``'s NIC time, ``(1 + (N_h − 1) w)/β``, equal to a healthy server's,
``(1 − w)(2N_h − 1)/N_h + w``: the bound's water-filling (``w = 0.047`` and ``1.890 · M``
there), and :func:`sliver_class_sizes` sizes the classes so that every healthy NIC
carries the same. The owners exchange it on ``d``'s alive rails in turn (the ``x``-th
owner on the ``x``-th alive rail after the class's own), so the partials reach ``d`` on
every alive NIC and land on its GPUs directly, a few on each. 1 GiB, 1 / 2 NICs lost: 8
servers 4.988 / 5.145 ms (1.045 / 1.061 × the bound) where the pipelined schedule took
5.189 / 5.394, 16 servers 5.299 (1.045 ×) where the decoupled ring took 5.483; 7 × 8
GPUs at 256 MiB 1.343 against 1.436 decoupled. On fewer servers the straggler's NVLink,
not its NICs, sets the floor (its dead-rail GPU owns nothing, see
:func:`~resilientcc.schedules.hier_pipeline.ring_order`) and the pipelined schedule is
as fast or faster (6 servers, 1 / 2 lost: 5.022 / 5.106 against 4.987 / 5.092 ms), so
OptCC uses the sliver from :data:`~resilientcc.schedules.optcc.SLIVER_MIN_SERVERS` on
(with one NIC of 8 lost only above
:data:`~resilientcc.schedules.optcc.ONE_DEAD_PIPELINE_MAX_SERVERS` servers, where the
pipelined schedule stops relaying).

**The sliver off the pieces' pace** (``sliver_lag``, default
:func:`default_sliver_lag`). The sliver needs no ring, so its exchange need not keep
step with its piece. Each owner sums its server's partial of a piece's sliver in an
NVLink ring pass of its own, at the start of the piece; the partials are *added* into
``d``'s GPUs before ``d``'s own ring over them (on :data:`SLIVER_CHANNEL`, so a partial
still on its way holds no piece up) carries them with ``d``'s part to the class's GPU; a
binomial broadcast gives every GPU of ``d`` the result; and ``d`` returns the results of
piece ``k`` only after its partials of piece ``k + lag`` (4 from 24 pieces on), each
owner then copying them to its GPUs in one hop. Before, the exchange ran inside each piece's passes (the
partials copied onto spent copies, a binomial tree into ``d``'s sum, the results back
at once), and ``d``'s egress idled at the end of the run: its last partials had left,
and the healthy servers still ran the last pieces' rings. With the results held back,
its egress still has the last pieces' results to send then. 1 GiB, 1 / 2 NICs lost: 8
servers 4.950 / 5.084 → 4.905 / 5.007 ms (1.037 / 1.049 → 1.028 / 1.032 × the bound;
zero latency 1.028 / 1.044 → 1.014 / 1.019), 16 servers 5.260 / 5.301 → 5.217 / 5.258
(1.037 → 1.028 ×); 8 servers at 256 MiB 1.146 → 1.111 ×. The lag: 0 / 4 / 8 / 16 pieces
1.031 / 1.028 / 1.029 / 1.042 × (8 servers, 1 lost, 1 GiB), and 0 / 4 / 8 / 12 / 16
1.122 / 1.111 / 1.114 / 1.121 / 1.171 × at 256 MiB: a longer lag leaves the healthy
servers' ingress the slivers' results at the end, beside the last rings.

Staging (``stage``, the default): the owner's chunk is written by the ring's last step
and by ``d``'s partial, and two writes of one buffer are ordered, so one of them waits
for the other to *complete*. With ``d``'s partial landing on the owner first (as before),
the ring's last hop waited for it, and ``d``, the bottleneck, set the pace of every
piece's last network hop: after ``d``'s last partial came the ring's last hop (one
network latency plus its bytes) and then the all-gather. Staged on another GPU, ``d``'s
partial waits for nothing but that GPU's first NVLink step, and what follows it is one
NVLink hop (1 GiB, half the NICs lost: 4 servers 5.509 → 5.497 ms, 8 servers 5.585 →
5.569; 256 MiB, 4 servers 1.482 → 1.470).

Bytes: a healthy server sends and receives ``(2(N_h − 1) + 1)/N_h · M`` with ``N_h =
N − 1`` healthy servers (the same as the one-hop exchange with ``d`` owning nothing: the
bound's water-filling when ``β ≤ β*``, and less than a flat ring's ``2(p − 1)/p · M``
otherwise), ``d`` sends and receives ``M``. The rails' parts are sized by
:func:`~resilientcc.schedules.hier_pipeline.class_sizes` (every healthy NIC loaded
alike, the rails dead on ``d`` up to ``d``'s per-NIC time). Where that loads every
owner's NICs evenly (:func:`dealt_evenly`: half the NICs lost), a rail dead on ``d`` is
one class whose owners' shards reach ``d`` on its alive rails in turn, which keeps the
chunks per piece at ``G · N_h``; otherwise it is one class per alive rail of ``d``, as in
the pipelined schedule (``(a + L·a) · N_h`` chunks per piece with ``a`` alive and ``L``
dead rails: ``14 · N_h`` with 1 of 8 NICs lost).

Order: the ids follow estimated times in which a ring step takes ``spacing`` times its
latency plus its bytes' time, so that every connection interleaves the ring steps of
the pieces in flight instead of idling for a latency at every step of one piece (8 × 8
GPUs, 4 NICs lost, 1 GiB, 96 pieces: ``spacing`` 1 / 1.5 / 2 / 2.5 / 3 took 6.463 /
5.587 / 5.588 / 5.604 / 5.649 ms; 2 is the default, clear of the cliff below 1.5; an
earlier version with 64 pieces took 6.81 ms with the steps of each piece together).
With the rings both ways it is 2.5 (:data:`TWO_WAY_SPACING`): 16 × 8 GPUs, 1 GiB, 1 / 2 /
4 NICs lost, spacing 2 → 2.5: 5.280 / 5.375 / 5.587 → 5.260 / 5.301 / 5.592 ms (1.75:
5.398 with 2 lost). At 2 the critical path of the 2-lost run ended in a convoy on one
rail's network all-gather: a piece's hop reaching a connection late, the next piece's
step queued behind it, 14 µs of latency at every hop.
Two windows hold ``d``'s traffic in step with the pieces: its partials of piece ``k``
wait for its results of piece ``k − net_window``, as in the pipelined schedule, and for
its partials of piece ``k − egress_window`` (each shard goes to another owner over its
own connection, so without it ``d``'s NICs are shared among all the pieces that are
ready and the first results come back late: 16 × 8 GPUs, 4 NICs lost, 64 pieces,
spacing 3, ``egress_window`` 0 / 1 / 2 / 3: 5.950 / 6.875 / 5.783 / 5.784 ms; one piece
leaves a latency gap between pieces). The pipeline depth comes from
:func:`default_ring_pieces`: small pieces where the healthy ring has few hops.

**Several degraded servers** (alike, as
:func:`~resilientcc.schedules.hier_pipeline.pipeline_blocker` asks: the same NICs alive
at the same bandwidth) are each decoupled as above: each sends its partial of every shard
to the owner's server, where it lands on a staging GPU of its own (the owner's first,
second, ... successor in the NVLink ring, :func:`staging_gpu`), and gets the result
back. Where they can own a part each owns a sliver ``w`` of every class
(:func:`default_sliver`, the water-filling's share), exchanged as above with the
healthy servers and with the other degraded ones; :func:`sliver_class_sizes` counts
``D`` of them on the alive rails, and every alive NIC then moves ``(1 + (N_h + D − 2)
w)/a · M``. Without a sliver a healthy server moves ``(2(N_h − 1) + D)/N_h · M``
(:func:`~resilientcc.schedules.optcc.decoupled_excess` compares that with the bound).
Against the pipelined schedule, whose one-hop exchange has ``N²`` flows per NIC (1 GiB,
two degraded servers, × the bound): half their NICs lost (no sliver, they own nothing),
8 servers 1.030 against 1.127, 16 servers 1.082 against 1.202; 1 / 2 of 8 lost, with
slivers, 8 servers 1.027 / 1.037 against 1.095 / 1.120, 16 servers 1.049 / 1.051
against 1.166 / 1.303 (decoupled without slivers 1.140 / 1.124), but 6 servers 1.148 /
1.123 against 1.082 / 1.104. :func:`~resilientcc.schedules.optcc.optcc` chooses between
them (see its module).

**Degraded servers that differ** (NICs lost on different rails, or some slowed:
:func:`hier_ring_blocker` asks only that each one's alive NICs run at one bandwidth) are
each decoupled the same way, without a sliver. Each rail ``q``'s part is cut into one
class per rail that the servers that lost ``q`` kept (:func:`unlike_splits`); a
degraded server exchanges a class on ``q`` where alive, else on the class's rail, so
it spreads what it lost evenly over what it kept, for every owner and every piece
(:func:`unlike_classes`). The parts' sizes come from a small linear program that
makes the busiest NIC's time least (:func:`unlike_sizes`): a server whose NICs all run
at half speed needs every part near ``1/8``, while a server that lost NICs would like
more on its dead rails. *Crossed* parts reconcile the two: a little of a rail's part
that every degraded server exchanges on another rail they all kept, so that the
half-speed server still moves ``1/8`` on each NIC while the rings of the rails the
other lost grow (:func:`unlike_crossed`: from three healthy servers on). 1 GiB, × the
bound, 8 servers, 2 NICs lost on one and every NIC at half speed on another: 1.125
(the direct schedule, which ran there before, 1.302); 4 lost beside half speed 1.038
(1.294), 6 lost 1.019 (1.105); 4 / 12 / 16 servers, 1 or 2 lost beside half speed
1.059 / 1.112 / 1.091 (1.263 / 1.398 / 1.512).

Both ways: from :data:`TWO_WAY_MIN_HEALTHY` healthy servers on, each shard's
reduce-scatter runs as two chains that meet at its owner, one forward from the ranks
before it and one backward from those after it, and its all-gather leaves the owner both
ways (:meth:`~resilientcc.schedules._build.Builder.ring_pass_two_way`). Every NIC moves the same bytes as in the one-way ring, but
a piece crosses about half the hops, which shortens both ends of the pipeline: the
straggler's first result and the all-gather after its last partial (1 GiB, half the NICs
lost, 96 pieces: 10 servers 5.611 → 5.590 ms, 16 servers 5.690 → 5.613; on 8 servers
5.588 → 5.596 and on 4 servers 5.524 → 5.557, where the owner's two chains, added in
turn, cost more than the hops saved). The owner's wait grows with the shards, which are
largest with few GPUs per server: with 2 it did not pay either (12 × 2 GPUs, 1 of 2 NICs
lost, 256 MiB, 32 pieces: 5.683 → 5.883 ms; 12 × 4 and 12 × 8 GPUs at 64 MiB, 16 pieces:
0.901 → 0.858 and 0.686 → 0.562), hence :data:`TWO_WAY_MIN_GPUS`. Even both ways the
first results reach a straggler that owns nothing late on many servers (16 servers,
half its NICs lost, 1 GiB: its ingress idle for the first 169 µs), so on 10 to 20
servers the first pieces cross the network by the direct pass instead
(:func:`default_direct_first`; 16 servers, 256 MiB, 4 lost: 1563.5 → 1533.0 µs).

Halving (``network="halving"``): the healthy servers' network passes run as recursive
halving and doubling (:meth:`~resilientcc.schedules._build.Builder.halving_pass`):
``⌈log2 N_h⌉`` steps per pass and ``N_h log N_h`` transfers per class and piece, where
a ring takes ``N_h − 1`` steps (about half both ways) and ``N_h²`` transfers. It was
slower wherever both could be measured, since a NIC then carries one connection per
level and the pieces in flight share it instead of queueing on one FIFO connection
(half the NICs of one server lost; 8 servers, 256 MiB, zero latency: 1.094 × the bound
with rings, 1.327 with halving; 64 servers, 1 GiB, 8 pieces, NVLink runs merged: 6.757
ms, 1.259 ×, against 6.999, 1.304 ×), but on 64 servers it had a quarter of the
transfers and simulated three times faster, and on 128 servers rings would take about
2.3 million transfers where halving takes a third of a million: OptCC uses it from
:data:`~resilientcc.schedules.optcc.HALVING_MIN_SERVERS` servers on.

**Small buffers** (up to :data:`~resilientcc.schedules.optcc.SMALL_NETWORK_MAX_BYTES`)
are latency-bound: a network step costs about 14 µs, an NVLink step 3.4 µs, their bytes
a few. OptCC then takes the passes with the fewest steps
(:func:`~resilientcc.schedules.optcc.small_network`): the *direct* network pass
(``network="direct"``: every partial of a shard straight to a GPU of its own on the
owner's server, a binomial NVLink tree folding them into the owner, the result straight
back; one network hop each way where the senders fit on the owner's GPUs; from
:data:`~resilientcc.schedules.optcc.HALVING_MIN_SERVERS` servers halving, as for any size);
recursive halving inside the servers (``nvlink_rs``,
:func:`~resilientcc.schedules.optcc.default_nvlink_rs`); flat NVLink all-gathers on
the degraded servers too; no sliver; and 8 pieces. 8 × 8 GPUs, 1 NIC lost, 4 MiB: 225 µs
with rings, 86 µs so; and up to
:data:`~resilientcc.schedules.optcc.SMALL_HIER_RING_MAX_BYTES` OptCC runs this schedule
wherever it can, with or without failures (:func:`~resilientcc.schedules.optcc.small_hier_ring`).

Shard order: each healthy server's NVLink reduce-scatter moves the shards in the order
its network ring sends them from there (its own last), its all-gather in the order they
arrive there (its own first), ties between a two-way ring's directions broken by the
owner's offset, so every healthy server does the same relative to itself
(:func:`ring_steps`). In owner order, the same on every server, the server farthest from
the first owner began its all-gather only after the ring's last hop (1 GiB, 1 / 2 / 4 NICs
lost: 8 servers 4.988 / 5.145 / 5.569 → 4.986 / 5.135 / 5.568 ms, 16 servers 5.299 /
5.411 / 5.585 → 5.286 / 5.391 / 5.587; 256 MiB, 8 servers, 1 / 2 lost: 1.158 / 1.161 →
1.146 / 1.152 × the bound).

The last pieces (:func:`default_flat_tail`) end with a flat NVLink all-gather on the
healthy servers: one hop from each holder to every GPU of its server, where the ring
takes ``G − 1`` (4 servers, half the NICs lost: 5.524 → 5.509 ms at 1 GiB, 1.498 →
1.482 at 256 MiB). The straggler keeps its ring: its few holders would each send ``G −
1`` copies (8 servers, 256 MiB, 7 NICs lost: 5.674 → 5.748 ms with one flat piece there).
Its ring all-gathers run both ways instead (``straggler_two_way``,
:meth:`~resilientcc.schedules._build.Builder.ring_pass_two_way`; never merged): every
GPU receives what the one-way ring brings it and they send as much in all (each GPU as
much where the groups are equal, without a sliver), in ``⌈(G − 1)/2⌉`` hops instead of
``G − 1``, so a piece's results reach the straggler's last GPU 3 NVLink latencies sooner, and the
run's last piece ends sooner. Half the NICs lost: 3 / 4 / 5 servers at 1 GiB 1.0209 /
1.0233 / 1.0302 → 1.0188 / 1.0215 / 1.0270 × the bound, at 256 MiB 3 / 4 servers
1.0858 / 1.0931 → 1.0773 / 1.0862; 16 servers 1.0417 → 1.0412; 8 servers with 1, 2 or 4
lost unchanged (there the healthy servers' tail ends the run). The zero-latency times
are the same or lower: it is the latency it saves. The pipelined schedule's rings stay
one way (both ways on every server, 4 servers, 256 MiB, 1 lost: 1.137 → 1.228: two
connections per GPU lose to sharing where NVLink binds).
Each holder's flat copies wait for its sends of the last ring all-gather over NVLink
(``flat_gate``): started as soon as their shards arrive, over ``G − 1`` connections
each, they took most of the holder's port from the ring all-gathers still ahead of them
(8 servers, 2 NICs lost, zero latency: those ended up to 188 µs after their last network
arrival). Gated, 1 GiB, 1 / 2 NICs lost: 8 servers 4.986 / 5.135 → 4.950 / 5.085 ms,
16 servers 5.286 / 5.391 → 5.280 / 5.375; with half the NICs lost and on 4 servers
unchanged. The copies are released no earlier than what they wait for
(:meth:`~resilientcc.schedules._build.Builder.flat_all_gather`'s ``after``): ids follow
releases, and a flat copy queued ahead of a ring step it waits for on their shared
connection deadlocks.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

from resilientcc.errors import ScheduleError
from resilientcc.schedules._build import (
    LINE_NIC_BW,
    LINE_NVL_BW,
    NET_LAT,
    NVL_LAT,
    Builder,
    ServerInfo,
    halving_splits,
)
from resilientcc.schedules.hier_pipeline import (
    PipeClass,
    class_sizes,
    degraded_alike,
    nvlink_rings,
    shape_blocker,
)
from resilientcc.schedules.ir import COPY, REDUCE

__all__ = [
    "DEFAULT_SPACING",
    "DIRECT_FIRST_MAX_SERVERS",
    "DIRECT_FIRST_MIN_PIECES",
    "DIRECT_FIRST_MIN_SERVERS",
    "DIRECT_FIRST_PIECES",
    "EGRESS_WINDOW_BYTES",
    "FLAT_TAIL_BYTES",
    "HALVING",
    "HOP_PIECE_BYTES",
    "MAX_RING_PIECE_BYTES",
    "MAX_SLIVER_LAG",
    "NETWORKS",
    "RING",
    "SIZE_GRID",
    "SLIVER_CHANNEL",
    "STAGE_CHANNEL",
    "STRAGGLER_ONE_WAY_MIN_BYTES",
    "TWO_WAY_FIRST_PIECES",
    "TWO_WAY_LAST_PIECES",
    "TWO_WAY_MIN_GPUS",
    "TWO_WAY_MIN_HEALTHY",
    "TWO_WAY_SPACING",
    "UNLIKE_CROSS_GAIN",
    "UNLIKE_CROSS_MIN_HEALTHY",
    "check_network",
    "dealt_evenly",
    "default_bidirectional",
    "default_direct_first",
    "default_egress_window",
    "default_flat_tail",
    "default_ring_pieces",
    "default_sliver",
    "default_sliver_gate",
    "default_sliver_lag",
    "default_straggler_two_way",
    "default_two_way_first",
    "default_two_way_last",
    "degraded_alike",
    "exchange_rail",
    "hier_ring",
    "hier_ring_blocker",
    "hier_ring_classes",
    "sliver_class_sizes",
    "staging_gpu",
    "unlike_classes",
    "unlike_crossed",
    "unlike_sizes",
    "unlike_splits",
]

#: the rails' parts of :func:`unlike_classes` are multiples of ``1/SIZE_GRID``
SIZE_GRID = 4096
#: degraded servers that differ exchange crossed parts (:func:`unlike_classes`) from
#: this many healthy servers on; with fewer only where the parts without them leave the
#: busiest NIC more than :data:`UNLIKE_CROSS_GAIN` slower (:func:`unlike_crossed`)
UNLIKE_CROSS_MIN_HEALTHY = 3
UNLIKE_CROSS_GAIN = 0.09

#: ``network`` values: NCCL-style rings, recursive halving and doubling
#: (:meth:`~resilientcc.schedules._build.Builder.halving_pass`), or one hop each way
#: (:data:`DIRECT`)
RING = "ring"
HALVING = "halving"
DIRECT = "direct"
NETWORKS = (RING, HALVING, DIRECT)
#: ``nvlink_rs`` values
NVLINK_PASSES = (RING, HALVING)


def check_network(network: str, name: str = "network", allowed: Sequence[str] = NETWORKS) -> None:
    """Refuse a ``network`` (or another option ``name``) that is not one of ``allowed``."""
    if network not in allowed:
        raise ScheduleError(f"optcc: {name} must be one of {', '.join(allowed)}, got {network!r}")


#: NVLink channel of the folds of staged partials into their owners (``stage``)
STAGE_CHANNEL = 2
#: NVLink channel of the trees that fold the staged partials of the direct network pass
#: into their owners (``network="direct"``)
FOLD_CHANNEL = 4
#: NVLink channel of the straggler's sliver's passes on ``d`` and of the broadcasts of its
#: results (``sliver_lag``). The owners sum their partials of it on channel 0, in turn
#: with the pieces' reduce-scatters (on this channel too they took 1.113 against 1.111 ×
#: the bound at 256 MiB, 1.0285 against 1.0278 at 1 GiB; 8 × 8 GPUs, 1 NIC lost)
SLIVER_CHANNEL = 3
#: the most pieces by which the straggler's sliver results wait (:func:`default_sliver_lag`)
MAX_SLIVER_LAG = 4
#: a ring step's slot in the id order, in units of (latency + bytes' time) of the step
DEFAULT_SPACING = 2.0
#: the same with the rings both ways (:data:`TWO_WAY_MIN_HEALTHY`)
TWO_WAY_SPACING = 2.5
#: the straggler's partials of piece ``k`` wait for its partials of piece ``k − W``, with
#: ``W`` the pieces in this many bytes (at least 2; :func:`default_egress_window`)
EGRESS_WINDOW_BYTES = 12 * 2**20
#: the last pieces in this many bytes get a flat NVLink all-gather (:func:`default_flat_tail`)
FLAT_TAIL_BYTES = 64 * 2**20
#: from this many healthy servers on, with at least :data:`TWO_WAY_MIN_GPUS` GPUs per
#: server, the rings run both ways (:meth:`~resilientcc.schedules._build.Builder.ring_pass_two_way`)
TWO_WAY_MIN_HEALTHY = 8
TWO_WAY_MIN_GPUS = 4
#: where the straggler owns nothing and the rings run one way: this many first pieces'
#: network reduce-scatters run both ways (:func:`default_two_way_first`)
TWO_WAY_FIRST_PIECES = 2
#: on :data:`DIRECT_FIRST_MIN_SERVERS` to :data:`DIRECT_FIRST_MAX_SERVERS` servers with at
#: most one degraded and a pipeline of :data:`DIRECT_FIRST_MIN_PIECES` pieces or more,
#: this many first pieces cross the network by the direct pass (:func:`default_direct_first`)
DIRECT_FIRST_PIECES = 8
DIRECT_FIRST_MIN_SERVERS = 10
DIRECT_FIRST_MAX_SERVERS = 20
DIRECT_FIRST_MIN_PIECES = 24
#: ... and this many last pieces' network all-gathers (:func:`default_two_way_last`)
TWO_WAY_LAST_PIECES = 4
#: where a degraded server owns a sliver, its NVLink all-gathers run one way from this
#: many bytes on (:func:`default_straggler_two_way`)
STRAGGLER_ONE_WAY_MIN_BYTES = 256 * 2**20
#: pieces of :func:`default_ring_pieces`: this many bytes per ring hop, at most
#: :data:`MAX_RING_PIECE_BYTES` (a 1 GiB buffer in 96 pieces)
HOP_PIECE_BYTES = 2 * 2**20
MAX_RING_PIECE_BYTES = Fraction(2**30, 96)


def hier_ring_blocker(servers: Sequence[ServerInfo]) -> str | None:
    """Why the hierarchical ring cannot run on ``servers`` (``None`` if it can).

    As :func:`~resilientcc.schedules.hier_pipeline.pipeline_blocker`, except that the
    degraded servers may differ (each is decoupled, without a sliver, and the rails'
    parts come from :func:`unlike_classes`); it needs two healthy servers.

    >>> from resilientcc.topology import apply_fail_specs, hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> hier_ring_blocker(server_view(apply_fail_specs(hierarchical(4, 8), ["0:2", "1:x1/2"])))
    >>> hier_ring_blocker(server_view(apply_fail_specs(hierarchical(3, 8), ["0:2", "1:x1/2"])))
    'two healthy servers'
    """
    blocker = shape_blocker(servers)
    if blocker is not None:
        return blocker
    if not degraded_alike(servers) and not all(sv.nic_bw for sv in servers):
        return "each NIC's bandwidth (not a switch model) where the degraded servers differ"
    if sum(1 for sv in servers if sv.healthy) < 2:
        return "two healthy servers"
    return None


def exchange_rail(
    sv: ServerInfo, rail: int, owner: int, owners: int, piece: int | None = None
) -> int:
    """The rail on which a degraded server ``sv`` exchanges the ``owner``-th healthy
    server's shard of a class of ``rail``: ``rail`` where it is alive on ``sv``; else the
    dead rails' shards are dealt over ``sv``'s alive rails.

    Alike degraded servers (``piece`` None) deal the same every piece: the ``j``-th dead
    rail's shard of owner ``x`` on alive rail ``(j·owners + x) mod a``
    (:func:`dealt_evenly`). Degraded servers that differ deal in turn, piece by piece:
    on alive rail ``(j + x·L + piece) mod a`` with ``L`` dead rails, so that within a
    piece an owner's dead-rail shards take different rails, and over ``a`` pieces each
    takes every alive rail once (every owner's NICs then see ``sv``'s traffic alike on
    average, whatever ``L``, ``a`` and the owners).

    >>> from resilientcc.topology import fail_nics, hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> sv = server_view(fail_nics(hierarchical(4, 8), 0, [0, 1]))[0]
    >>> exchange_rail(sv, 5, 0, 3), [exchange_rail(sv, 1, x, 3) for x in range(3)]
    (5, [5, 6, 7])
    >>> tuple(exchange_rail(sv, q, 1, 3, piece=0) for q in (0, 1))
    (4, 5)
    """
    if rail in sv.alive:
        return rail
    dead = [q for q in range(sv.nics) if q not in sv.alive]
    j, a = dead.index(rail), len(sv.alive)
    if piece is None:
        return sv.alive[(j * owners + owner) % a]
    return sv.alive[(j + owner * len(dead) + piece) % a]


def unlike_splits(servers: Sequence[ServerInfo]) -> dict[int, list[int]]:
    """For degraded servers that differ: each rail's part cut into one class per rail on
    which the degraded servers that lost it exchange it (those alive on all of them).

    A degraded server exchanges a class ``(q, c)`` on ``q`` where alive, else on ``c``
    (:func:`unlike_classes`), so each one that lost ``q`` spreads ``q``'s part evenly over
    its alive rails, for every owner and every piece. A rail no degraded server lost is
    one class; where the servers that lost ``q`` have no alive rail in common, ``q`` is
    one class, dealt in turn (:func:`exchange_rail`).

    >>> from resilientcc.topology import apply_fail_specs, hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> t = apply_fail_specs(hierarchical(8, 4), ["0:nic0", "1:nic3x1/2", "2:nic3"])
    >>> unlike_splits(server_view(t))
    {0: [1, 2, 3], 1: [1], 2: [2], 3: [0, 1, 2]}
    """
    g = servers[0].nics
    slow = [sv for sv in servers if not sv.healthy]
    out = {}
    for q in range(g):
        lacking = [sv for sv in slow if q not in sv.alive]
        common = [c for c in range(g) if all(c in sv.alive for sv in lacking)]
        out[q] = common if lacking and common else [q]
    return out


def unlike_classes(servers: Sequence[ServerInfo]) -> list[PipeClass]:
    """The rails' parts of a piece for degraded servers that differ, each decoupled: rail
    ``q``'s cut part (:func:`unlike_sizes`) cut into the classes ``(q, c)`` of
    :func:`unlike_splits`, alike, then the crossed classes (``crossed``: every degraded
    server exchanges them on ``rail_d``; :func:`unlike_crossed`).

    >>> from resilientcc.topology import apply_fail_specs, hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> t = apply_fail_specs(hierarchical(8, 8), ["0:2", "1:x1/2"])
    >>> cls = unlike_classes(server_view(t))  # rails 0 and 1 cut over rails 2-7
    >>> len(cls), sorted({(c.rail, str(c.size)) for c in cls if not c.crossed})[:3]
    (24, [(0, '1/48'), (1, '1/48'), (2, '495/4096')])
    >>> tuple(sorted((c.rail, c.rail_d, str(c.size)) for c in cls if c.crossed))[:3]
    ((0, 4, '17/4096'), (0, 6, '17/4096'), (0, 7, '17/4096'))
    """
    splits, sizes, crossed, _ = _unlike_choice(tuple(servers))
    cut_classes = [
        PipeClass(q, c, sizes[q] / len(cut))
        for q, cut in enumerate(splits)
        if sizes[q] > 0
        for c in cut
    ]
    return cut_classes + [PipeClass(q, c, size, crossed=True) for q, c, size in crossed]


def unlike_sizes(servers: Sequence[ServerInfo]) -> tuple[list[Fraction], float]:
    """The size of each rail's part of a piece (summing to 1) for degraded servers that
    differ, each decoupled, and the busiest NIC's time (seconds per byte of the buffer).

    Rail ``q``'s part ``s_q`` runs its rings among the ``N_h`` healthy servers on rail
    ``q`` (``2(N_h − 1)/N_h · s_q`` each way on each one's rail-``q`` NIC), cut into the
    classes ``(q, c)`` of :func:`unlike_splits`, plus its crossed parts. A degraded
    server exchanges each cut class with the owners (``1/N_h`` with each) on ``q`` where
    alive, else on ``c``, else dealt over its alive rails in turn; a crossed part
    ``(q, c)`` on ``c``, a rail every degraded server kept. The sizes make the busiest
    NIC's bytes over its bandwidth least: a small linear program (HiGHS); a second one
    keeps that time and makes the busiest healthy NIC's least (where a degraded server
    binds, the first leaves the healthy NICs at any optimal corner); a third keeps both
    and makes the crossed parts least. The sizes are rounded to multiples of
    ``1/``:data:`SIZE_GRID`, summing to 1 exactly. A server that lost two NICs beside one
    whose NICs all run at half speed (8 servers): the slow one needs ``1/8`` on every
    NIC, while the first would like more on its dead rails (whose parts it does not load).
    With the cut classes alone the two meet at parts of 523/4096 on rails 0 and 1, and
    the busiest NICs carry 2.2 % more than the bound's placement, ``2 M`` per server
    bandwidth (equal parts: 2.8 %); with crossed parts rails 0 and 1 take 563/4096, the
    slow server exchanges their excess on other rails, and the busiest NIC is at the
    bound's placement but for rounding. The time returned is the busiest NIC's with the
    rounded sizes.

    >>> from resilientcc.topology import apply_fail_specs, hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> t = apply_fail_specs(hierarchical(8, 8), ["0:2", "1:x1/2"])
    >>> sizes, busy = unlike_sizes(server_view(t))
    >>> [int(x * SIZE_GRID) for x in sizes], round(busy * 50e9 * 8, 4)  # M / server bandwidth
    ([563, 563, 495, 495, 495, 495, 495, 495], 2.0002)
    """
    _, sizes, crossed, busy = _unlike_choice(tuple(servers))
    parts = list(sizes)
    for q, _, size in crossed:
        parts[q] += size
    return parts, busy


_UnlikePlan = tuple[
    tuple[tuple[int, ...], ...], tuple[Fraction, ...], tuple[tuple[int, int, Fraction], ...], float
]


def unlike_crossed(servers: Sequence[ServerInfo]) -> bool:
    """Whether the rails' parts for degraded servers that differ may have crossed parts
    (:func:`unlike_classes`; the sizes' program then decides how much crosses, maybe
    nothing): from :data:`UNLIKE_CROSS_MIN_HEALTHY` healthy servers on, and with fewer
    where the parts without them leave the busiest NIC more than
    :data:`UNLIKE_CROSS_GAIN` slower.

    With two healthy servers the crossed parts load both ends of a rail to the full,
    and the fair share the healthy ring leaves the slow server there falls short: 4
    servers, 1 GiB, NIC 0 lost beside half speed 5.686 → 6.185 ms (2 lost 6.004 → 6.057),
    but 4 lost beside half speed, where the busiest NIC took 14 % longer without them,
    7.104 (the direct schedule) → 5.987.

    >>> from resilientcc.topology import apply_fail_specs, hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> tuple(unlike_crossed(server_view(apply_fail_specs(hierarchical(n, 8), [f, "1:x1/2"])))
    ...       for n, f in ((4, "0:1"), (4, "0:4"), (5, "0:1")))
    (False, True, True)
    """
    view = tuple(servers)
    if sum(1 for sv in view if sv.healthy) >= UNLIKE_CROSS_MIN_HEALTHY:
        return True
    return _unlike_plan(view, False)[3] > _unlike_plan(view, True)[3] * (1 + UNLIKE_CROSS_GAIN)


def _unlike_choice(servers: tuple[ServerInfo, ...]) -> _UnlikePlan:
    """The plan :func:`unlike_classes` runs, crossed or not (:func:`unlike_crossed`)."""
    return _unlike_plan(servers, unlike_crossed(servers))


@functools.lru_cache(maxsize=64)
def _unlike_plan(servers: tuple[ServerInfo, ...], cross: bool) -> _UnlikePlan:
    """Each rail's classes (:func:`unlike_splits`), their sizes, the crossed parts
    ``(q, c, size)`` (none unless ``cross``) and the busiest NIC's time of
    :func:`unlike_sizes`; cached, as OptCC's choice (``unlike_excess``) and the schedule
    both ask for them."""
    from scipy.optimize import linprog  # scipy only here: the schedules' linear programs

    splits = unlike_splits(servers)

    g = servers[0].nics
    slow = [sv for sv in servers if not sv.healthy]
    no = sum(1 for sv in servers if sv.healthy)
    top = max(max(sv.nic_bw) for sv in servers if sv.nic_bw)
    # the variables: rail q's cut part s_q (split evenly over splits[q]), then the
    # crossed parts x_(q, c) that every degraded server exchanges on c, a rail alive on
    # all of them
    common = [c for c in range(g) if all(c in sv.alive for sv in slow)]
    crossing = [(q, c) for q in range(g) for c in common if c != q] if cross else []
    nv = g + len(crossing)
    rail_var = list(range(g)) + [q for q, _ in crossing]  # the ring each variable runs on
    # coefficients of the variables in each degraded server's load per rail
    loads = {(sv.index, r): [0.0] * nv for sv in slow for r in sv.alive}
    for sv in slow:
        for q, cut in splits.items():
            for c in cut:
                share = 1 / len(cut)
                if q in sv.alive or c in sv.alive:
                    loads[(sv.index, q if q in sv.alive else c)][q] += share
                else:  # dealt in turn: on average alike on every alive rail
                    for r in sv.alive:
                        loads[(sv.index, r)][q] += share / len(sv.alive)
        for j, (_, c) in enumerate(crossing, start=g):
            loads[(sv.index, c)][j] += 1.0
    rows = [[*row, -float(servers[s].nic_bw[r] / top)] for (s, r), row in loads.items()]
    for r in range(g):  # a healthy server's rail-r NIC (all alike at full bandwidth)
        row = [2 * (no - 1) / no if rail_var[j] == r else 0.0 for j in range(nv)]
        for sv in slow:
            if r in sv.alive:
                row = [x + y / no for x, y in zip(row, loads[(sv.index, r)], strict=True)]
        rows.append([*row, -1.0])
    healthy_rows = rows[-g:]

    def solve(cost: list[float], a_ub: list[list[float]], b_ub: list[float]) -> list[float]:
        res = linprog(
            c=cost,
            A_ub=a_ub,
            b_ub=b_ub,
            A_eq=[[1.0] * nv + [0.0]],
            b_eq=[1.0],
            bounds=[(0, None)] * (nv + 1),
            method="highs",
        )
        if res.status != 0:
            raise ScheduleError(f"optcc: no sizes for the rails' parts ({res.message})")
        return [float(v) for v in res.x]

    # the busiest NIC's time least; then, keeping it, the busiest healthy NIC's (where a
    # degraded server binds, the healthy NICs are otherwise left to any optimal corner:
    # 8 servers, 6 NICs lost on one, the parts of only four rails); then, keeping both,
    # the least crossed (each crossed shard takes an NVLink hop to or from its owner)
    time_only = [0.0] * nv + [1.0]
    first = solve(time_only, rows, [0.0] * len(rows))
    least = first[nv] * (1 + 1e-9)
    fixed = [[*row[:-1], 0.0] for row in rows]
    bounds_first = [-row[-1] * least for row in rows]
    second = solve(time_only, fixed + healthy_rows, bounds_first + [0.0] * g)
    healthy_least = second[nv] * (1 + 1e-9)
    sol = second
    if crossing:
        crossed_cost = [0.0] * g + [1.0] * len(crossing) + [0.0]
        sol = solve(
            crossed_cost,
            fixed + [[*row[:-1], 0.0] for row in healthy_rows],
            bounds_first + [healthy_least] * g,
        )
    # on a grid of 1/SIZE_GRID (small denominators for the chunk grid), summing to 1
    # (largest remainders: each part within one step of the program's)
    exact = [max(v, 0.0) * SIZE_GRID for v in sol[:nv]]
    units = [math.floor(x) for x in exact]
    for j in sorted(range(nv), key=lambda j: units[j] - exact[j])[: SIZE_GRID - sum(units)]:
        units[j] += 1
    values = [Fraction(u, SIZE_GRID) for u in units]
    # the busiest NIC with the rounded sizes: its bytes per byte of the buffer over its
    # bandwidth
    busy = max(
        -sum(c * float(v) for c, v in zip(row[:-1], values, strict=True)) / row[-1] for row in rows
    )
    crossed = tuple((q, c, v) for (q, c), v in zip(crossing, values[g:], strict=True) if v > 0)
    return tuple(tuple(splits[q]) for q in range(g)), tuple(values[:g]), crossed, busy / float(top)


def default_sliver_gate(net_window: int, sliver_lag: int) -> int:
    """:func:`hier_ring`'s ``sliver_gate``: the network window plus the sliver's lag, in
    pieces (see the experiment log: 6 × 4 GPUs, 1 NIC lost, 4 GiB, 4 / 8 / 16 / 20 / 32
    pieces took 1.067 / 1.055 / 1.030 / 1.023 / 1.027 × the bound, 1.104 without a gate).

    >>> default_sliver_gate(15, 4)
    19
    """
    return net_window + sliver_lag


def hier_ring_classes(
    servers: Sequence[ServerInfo], sliver: Fraction = Fraction(0)
) -> list[PipeClass]:
    """The rails' parts of a piece: one class per rail (``rail_d = −1``: dead on ``d``).

    With a ``sliver`` (:func:`default_sliver`; only where the dead rails are cut, not
    dealt) the sizes load every healthy NIC alike with the sliver's traffic counted
    (:func:`sliver_class_sizes`).

    >>> from resilientcc.topology import hierarchical, fail_nics
    >>> from resilientcc.schedules._build import server_view
    >>> cls = hier_ring_classes(server_view(fail_nics(hierarchical(4, 8), 0, 4)))
    >>> tuple((c.rail, c.rail_d, str(c.size)) for c in cls if c.rail in (0, 7))
    ((7, 7, '1/16'), (0, -1, '3/16'))
    """
    g = servers[0].nics
    degraded = [sv for sv in servers if not sv.healthy]
    if not degraded:
        return [PipeClass(c, c, Fraction(1, g)) for c in range(g)]
    if not degraded_alike(servers):
        return unlike_classes(servers)
    d = degraded[0]  # alike (degraded_alike): the same NICs dead
    dead = [q for q in range(g) if q not in d.alive]
    n_h = len(servers) - len(degraded)
    a = len(d.alive)
    dealt = dealt_evenly(len(dead), a, n_h)
    if sliver > 0 and not dealt:
        big, small = sliver_class_sizes(a, len(dead), n_h, sliver, len(degraded))
    else:
        big, small = class_sizes(
            g, dead, len(servers), Fraction(1, n_h), Fraction(0), len(degraded)
        )
    out = [PipeClass(c, c, big) for c in d.alive] if big > 0 else []
    if small > 0 and dealt:
        out += [PipeClass(q, -1, small * a) for q in dead]
    elif small > 0:
        out += [PipeClass(q, c, small) for q in dead for c in d.alive]
    return out


def default_sliver(servers: Sequence[ServerInfo]) -> Fraction:
    """The part of every class a degraded server owns: its NIC time equal to a healthy one's.

    With ``N_h`` healthy servers, a healthy server moves ``(1 − w)(2N_h − 1)/N_h + w``
    (times ``M``, each way) and the straggler ``1 + (N_h − 1) w`` at ``β`` of the
    bandwidth; equal at ``w = (A − 1/β) / ((A − 1) + (N_h − 1)/β)`` with ``A = (2N_h −
    1)/N_h``: the bound's placement. Zero where the straggler is too slow to own
    anything (``β ≤ β*``, ``A ≤ 1/β``) and where its dead rails are dealt
    (:func:`dealt_evenly`, which needs ``β ≤ 1/2``).

    >>> from resilientcc.topology import hierarchical, fail_nics
    >>> from resilientcc.schedules._build import server_view
    >>> w = default_sliver(server_view(fail_nics(hierarchical(16, 8), 0, 1)))
    >>> w, round(float(w), 4)
    (Fraction(83, 1778), 0.0467)
    >>> default_sliver(server_view(fail_nics(hierarchical(16, 8), 0, 4)))
    Fraction(0, 1)

    With ``D`` degraded servers alike, each owns ``w`` of every class, and exchanges it
    with the healthy servers and with the other ``D − 1``: a degraded server moves ``1 +
    (N_h + D − 2) w`` and a healthy one ``(1 − D w)(2N_h − 2 + D)/N_h + D w``.

    >>> two = fail_nics(fail_nics(hierarchical(16, 8), 0, 1), 1, 1)
    >>> default_sliver(server_view(two))  # the water-filling's share (balanced_shares)
    Fraction(1, 21)
    """
    degraded = [sv for sv in servers if not sv.healthy]
    if not degraded or not degraded_alike(servers):
        return Fraction(0)
    d, n_d = degraded[0], len(degraded)
    g = d.nics
    dead = g - len(d.alive)
    n_h = len(servers) - n_d
    if not d.alive or n_h < 2 or dealt_evenly(dead, len(d.alive), n_h):
        return Fraction(0)
    top = max(sv.bandwidth for sv in servers)
    beta = d.bandwidth / top
    if beta <= 0:
        return Fraction(0)
    big = Fraction(2 * n_h - 2 + n_d, n_h)
    w = (big - 1 / beta) / (n_d * (big - 1) + (n_h + n_d - 2) / beta)
    if w <= 0:
        return Fraction(0)
    if dead and sliver_class_sizes(len(d.alive), dead, n_h, w, n_d)[0] <= 0:
        # the degraded servers' traffic alone loads the alive rails more than the dead
        # ones carry: no sizes balance the NICs (few healthy servers), no sliver
        return Fraction(0)
    return w


def sliver_class_sizes(
    alive: int, dead: int, owners: int, w: Fraction, degraded: int = 1
) -> tuple[Fraction, Fraction]:
    """Sizes ``(A, b)`` of the alive rails' classes and of the cut dead rails' ones.

    A healthy NIC on an alive rail ``c`` carries its class's ring, ``A(1 − w)·r`` with
    ``r = 2(N_h − 1)/N_h``, and the straggler's traffic of every class on ``c``, ``(A +
    L·b)·e`` with ``e = (1 − w)/N_h + w`` (the ring part's partial and result of the
    shard it owns, and the sliver's partial and result); a NIC on a dead rail only the
    ring of its ``a`` cut classes, ``a·b(1 − w)·r``. Equal, with ``a·A + L·a·b = 1``. At
    ``w = 0`` these are :func:`~resilientcc.schedules.hier_pipeline.class_sizes`'
    balanced sizes. With ``D = degraded`` servers alike, each owning ``w``, the ring part
    is ``1 − D w``, ``e = (1 − D w)/N_h + w`` and the alive rail carries ``D`` times the
    degraded servers' traffic.

    >>> from resilientcc.schedules.hier_pipeline import class_sizes
    >>> sliver_class_sizes(7, 1, 15, Fraction(0)) == class_sizes(8, [0], 16, Fraction(1, 15), 0)
    True
    >>> sliver_class_sizes(7, 1, 15, Fraction(83, 1778))  # 16 servers, 1 of 8 NICs lost
    (Fraction(14, 113), Fraction(15, 791))
    """
    r = Fraction(2 * (owners - 1), owners)
    ring = 1 - degraded * w
    e = ring / owners + w
    ratio = (alive * ring * r - dead * degraded * e) / (ring * r + degraded * e)
    small = 1 / (alive * ratio + dead * alive)
    return ratio * small, small


def default_ring_pieces(size: Fraction, servers: int) -> int:
    """Pipeline depth of the hierarchical ring: pieces of 2 MiB per healthy ring hop, ≤ 32/3 MiB.

    Few hops want small pieces (the straggler waits about one piece at each end), many
    hops larger ones (every piece pays the ring's latency at every hop). Measured at 1
    GiB with half the NICs of one server lost (spacing 2, :func:`default_egress_window`):
    4 servers, 96 / 128 / 192 / 256 / 384 pieces: 5.584 / 5.560 / 5.524 / 5.524 / 5.518
    ms; 8 servers, 64 / 96 / 128 / 192: 5.620 / 5.588 / 5.590 / 5.618; 16 servers, 64 /
    96 / 128: 5.723 / 5.690 / 5.725. At 256 MiB on 4 servers 32 / 64 / 128 pieces took
    1.533 / 1.498 / 1.482 ms.

    >>> tuple(default_ring_pieces(Fraction(2**30), n) for n in (3, 4, 8, 16))
    (512, 256, 96, 96)
    >>> default_ring_pieces(Fraction(2**28), 4), default_ring_pieces(Fraction(2**20), 8)
    (64, 2)
    """
    per_piece = min(Fraction(HOP_PIECE_BYTES * max(1, servers - 2)), MAX_RING_PIECE_BYTES)
    return max(2, round(size / per_piece))


def default_egress_window(size: Fraction, pieces: int) -> int:
    """The straggler's egress window in pieces: those in :data:`EGRESS_WINDOW_BYTES`, at least 2.

    One piece leaves a latency gap between pieces; a window counted in pieces becomes too
    tight when pieces are small (4 × 8 GPUs, 4 NICs lost, 1 GiB, 256 pieces of 4 MiB:
    ``W`` = 2 / 3 / 4 / 6 took 5.749 / 5.538 / 5.534 / 5.540 ms, spacing 3).

    >>> default_egress_window(Fraction(2**30), 64), default_egress_window(Fraction(2**30), 256)
    (2, 3)
    """
    return max(2, math.ceil(EGRESS_WINDOW_BYTES * pieces / size))


def default_flat_tail(size: Fraction, pieces: int) -> int:
    """Last pieces whose NVLink all-gather is flat: those in :data:`FLAT_TAIL_BYTES`, at least 1.

    A flat all-gather moves the bytes of the ring's (each holder sends its group to the
    ``G − 1`` others, the ring's GPUs forward ``G − 1`` groups) in one hop instead of
    ``G − 1``, but over ``G − 1`` connections per GPU, so the pieces in flight share each
    port instead of queueing on one connection; at the end of the pipeline nothing waits
    behind them. 4 × 8 GPUs, half the NICs of one server lost, last 0 / 1 / 2 / 4 / 8 / 16
    pieces flat (measured with the straggler's flat too; 16 pieces at 1 GiB and 8 at 256
    MiB give the same times without it): 1 GiB (256 pieces) 5.524 / 5.520 / 5.516 / 5.510 / 5.509 / 5.509 ms;
    256 MiB (64 pieces) 0 / 2 / 4 / 8 / 16 / 32 / 64: 1.498 / 1.490 / 1.484 / 1.482 /
    1.482 / 1.534 / 2.031 ms; 8 servers at 1 GiB (96 pieces), 0 / 3 / 4 / 6 / 8: 5.588 /
    5.592 / 5.586 / 5.585 / 5.585.
    Binomial-tree reduce-scatters for the first piece (3 NVLink hops instead of 7) took
    5.526 ms against 5.520 (flat last piece).

    >>> default_flat_tail(Fraction(2**30), 256), default_flat_tail(Fraction(2**30), 96)
    (16, 6)
    >>> default_flat_tail(Fraction(2**24), 4)  # small buffers: every piece
    4
    """
    return min(pieces, max(1, math.ceil(FLAT_TAIL_BYTES * pieces / size)))


def default_sliver_lag(pieces: int) -> int:
    """Pieces by which the straggler's sliver results wait: a sixth of the pieces, 1 to
    :data:`MAX_SLIVER_LAG` (see :func:`hier_ring`'s ``sliver_lag``).

    Measured, × the bound, lag 0 / 1 / 2 / 4: 8 × 8 GPUs, 1 NIC lost, 128 MiB (12
    pieces) 1.244 / 1.222 / 1.224 / 1.222, 2 lost 1.246 / 1.234 / 1.223 / 1.223; 7 × 8
    GPUs, 1 lost, 64 MiB (6 pieces) 1.448 / 1.445 / 1.461 / 1.469; at 256 MiB (24
    pieces) and 1 GiB (96) 4 is best (module docs), and 8 no better (8 servers, 512
    MiB, 48 pieces, lag 2 / 4 / 8: 1.056 / 1.056 / 1.057; 6 servers, 1 GiB, 128
    pieces: 1.082 / 1.070 / 1.072).

    >>> tuple(default_sliver_lag(p) for p in (1, 6, 12, 24, 96))
    (1, 1, 2, 4, 4)
    """
    return min(MAX_SLIVER_LAG, max(1, pieces // 6))


def dealt_evenly(dead: int, alive: int, owners: int) -> bool:
    """Whether dealing the dead rails' shards over the alive rails loads every owner evenly.

    Owner ``x`` gets its shard of the ``j``-th dead rail on alive rail ``(j·owners + x) mod
    alive``; each owner's NICs are loaded alike when every alive rail comes up equally
    often. Otherwise each dead rail is cut into one class per alive rail, as in the
    pipelined schedule (1 GiB, 16 × 8 GPUs, 1 NIC lost: 5.863 ms dealt, its busiest
    healthy NIC 3 % above the least busy; 5.600 ms cut, at 1.75 times the transfers).

    >>> dealt_evenly(4, 4, 15), dealt_evenly(1, 7, 15), dealt_evenly(2, 6, 15)
    (True, False, False)
    """
    if dead % alive:
        return False
    for x in range(owners):
        rails = Counter((j * owners + x) % alive for j in range(dead))
        if len(rails) != alive or len(set(rails.values())) != 1:
            return False
    return True


def staging_gpu(ring: Sequence[int], owner: int, x: int = 0) -> int:
    """Where the ``x``-th degraded server's partial of ``owner``'s shard lands: ``owner``'s
    ``(x + 1)``-th successor in its server's NVLink ``ring``.

    The first successor starts the shard's NVLink reduce-scatter chain
    (:meth:`~resilientcc.schedules._build.Builder.ring_reduce_scatter` forwards group
    ``q`` from ``ring[q + 1]`` on), so its own copy of the shard is spent after the
    chain's first step and is never written by the chain: the partial can overwrite it
    without waiting for anything later. The ``j``-th successor's copy is spent once it
    has forwarded the chain (step ``j``), where a later degraded server's partial lands.

    >>> staging_gpu([3, 1, 2, 0], 2), staging_gpu([3, 1, 2, 0], 0), staging_gpu([3, 1, 2, 0], 0, 1)
    (0, 3, 1)
    """
    if not 0 <= x < len(ring) - 1:
        raise ScheduleError(f"optcc: no staging GPU {x} on a server of {len(ring)} GPUs")
    return ring[(list(ring).index(owner) + 1 + x) % len(ring)]


def ring_steps(
    owners: int, two_way: bool, op: str, network: str = RING
) -> dict[tuple[int, int], int]:
    """``{(position, group): step}``: when a network ring pass among ``owners`` positions
    first touches each group at each position.

    Reduce-scatter (``op`` reduce): the step at which the position first *sends* the
    group (its own group, never sent, gets ``owners``); all-gather: the step at which the
    group *arrives* there (its own, there from the start, gets ``-1``). Read off the
    builder's own passes, so it follows them; ``network="halving"`` reads the
    recursive halving pass instead (a step is then a level).

    >>> steps = ring_steps(4, False, REDUCE)
    >>> tuple(steps[(0, q)] for q in range(4)), tuple(ring_steps(4, False, COPY)[(0, q)] for q in range(4))
    ((4, 2, 1, 0), (-1, 2, 1, 0))
    """
    if network == DIRECT:  # every group sent and received at once
        return {
            (x, q): (owners if x == q else 0) if op == REDUCE else (-1 if x == q else 0)
            for x in range(owners)
            for q in range(owners)
        }
    scratch = Builder("ring_steps", owners)
    groups = [[scratch.chunk(Fraction(1, owners))] for _ in range(owners)]
    ring = list(range(owners))
    if network == HALVING:
        scratch.halving_pass(ring, groups, 0, op, release=0.0, level_release=1.0)
    elif two_way:
        scratch.ring_pass_two_way(ring, groups, 0, op, release=0.0, step_release=1.0)
    elif op == REDUCE:
        scratch.ring_reduce_scatter(ring, groups, 0, release=0.0, step_release=1.0)
    else:
        scratch.ring_all_gather(ring, groups, 0, release=0.0, step_release=1.0)
    out: dict[tuple[int, int], int] = {}
    for src, dst, first, count, rel in scratch.added_runs():
        for chunk in range(first, first + count):
            key = (src if op == REDUCE else dst, chunk)
            out[key] = min(out.get(key, owners), int(rel))
    for q in range(owners):
        out[(q, q)] = owners if op == REDUCE else -1
    return out


def default_bidirectional(servers: Sequence[ServerInfo], halving: bool) -> bool:
    """Whether the rings run both ways by default: from :data:`TWO_WAY_MIN_HEALTHY`
    healthy servers of :data:`TWO_WAY_MIN_GPUS` GPUs or more, and not with halving.

    Then :func:`default_two_way_first` and :func:`default_two_way_last` have nothing to
    add (``optcc`` records them as 0).
    """
    healthy = sum(1 for sv in servers if sv.healthy)
    return healthy >= TWO_WAY_MIN_HEALTHY and servers[0].nics >= TWO_WAY_MIN_GPUS and not halving


def default_direct_first(servers: Sequence[ServerInfo], pieces: int, network: str) -> int:
    """Pieces whose network passes are direct (one hop each way, as for small buffers)
    where the rest run rings: :data:`DIRECT_FIRST_PIECES` on
    :data:`DIRECT_FIRST_MIN_SERVERS` to :data:`DIRECT_FIRST_MAX_SERVERS` servers with at
    most one degraded, where the rings run (``network`` :data:`RING`) and the pipeline
    has :data:`DIRECT_FIRST_MIN_PIECES` pieces or more; else 0.

    A degraded server that owns nothing has nothing to receive until its first results
    come back, after the first piece's network reduce-scatter around the healthy
    servers: on 16 servers, half the NICs lost, 1 GiB, its ingress (a binding link) got
    its first byte at 169 µs, 25 µs after its egress, against 64 on 4 servers. Direct
    first pieces bring the results back sooner and feed the pipeline while the rings
    fill. µs, rings → first 8 pieces direct: 256 MiB, 16 servers, 1 / 2 / 4 NICs lost
    1412.3 / 1423.4 / 1563.5 → 1401.3 / 1410.1 / 1533.0, no failure 1419.1 → 1406.9; 12
    servers 1 / 2 / 4 lost 1361.2 / 1375.4 / 1538.6 → 1351.3 / 1368.5 / 1511.9, no
    failure 1360.4 → 1347.7; 10 servers 1 / 4 lost 1338.8 / 1520.1 → 1338.3 / 1509.5;
    20 servers, 1 lost 1456.1 → 1442.0; 1 GiB, 16 servers 1 / 2 / 4 lost 5217.0 / 5258.3
    / 5590.1 → 5209.4 / 5258.6 / 5559.5, 12 servers 4 lost 5565.1 → 5538.4. Not adopted:
    8 servers (256 MiB, 1 / 4 lost 1325.5 / 1505.0 → 1348.1 / 1509.1; 2 pieces 1322.9 /
    1515.9), 24 servers (4 lost 2090.9 → 2112.2), two degraded servers, where it was
    mixed (16 servers, 4 lost on each 1553.6 → 1564.8, or 2 lost beside half speed
    1569.8 → 1576.7; but 12 servers, 1 lost on each, 1405.8 → 1375.2) and 12 pieces (128 MiB, 16 servers, no
    failure / 1 lost 790.0 / 777.2 → 799.7 / 801.1, with 2 pieces 783.5 / 776.1).

    >>> from resilientcc.topology import hierarchical, fail_nics
    >>> from resilientcc.schedules._build import server_view
    >>> sv = server_view(fail_nics(hierarchical(16, 8), 0, 4))
    >>> default_direct_first(sv, 96, RING), default_direct_first(sv, 12, RING)
    (8, 0)
    >>> default_direct_first(server_view(fail_nics(hierarchical(8, 8), 0, 4)), 96, RING)
    0
    """
    degraded = sum(1 for sv in servers if not sv.healthy)
    fits = DIRECT_FIRST_MIN_SERVERS <= len(servers) <= DIRECT_FIRST_MAX_SERVERS
    if network != RING or degraded > 1 or not fits or pieces < DIRECT_FIRST_MIN_PIECES:
        return 0
    return DIRECT_FIRST_PIECES


def default_two_way_first(sliver: Fraction, halving: bool) -> int:
    """Pieces whose network reduce-scatters run both ways although the rings run one way.

    Where the straggler owns nothing (``sliver`` 0) its ingress, a binding link, has
    nothing to do until its first results come back, after the first piece's network
    reduce-scatter among the healthy servers: ``N_h − 1`` hops of 14 µs one way, about
    half both ways. So the first piece's reduce-scatter runs both ways (later pieces
    gain nothing from it: 1, 2, 4, 8 or 32 pieces gave the same time; its all-gather both
    ways too lost, 8 servers 1.0349 against 1.0333 below). × the bound, half the
    NICs lost, 1 GiB, off / on: 4 servers 1.0238 / 1.0233, 7 servers 1.0334 / 1.0313, 8
    servers 1.0371 / 1.0333, and at 256 MiB 4 servers 1.0953 / 1.0931, 8 servers 1.1484
    / 1.1331. Where it owns a sliver it is mixed (1 GiB, 1 / 2 lost: 6 servers, 2 lost
    1.0425 / 1.0401; 7 servers 1.0300 / 1.0286 and 1.0272 / 1.0300; 8 servers 1.0278 /
    1.0288 and 1.0325 / 1.0328; 256 MiB, 8 servers, 1 lost 1.1111 / 1.1153), so 0
    there; and with halving 0. With the last pieces' all-gathers both ways
    (:func:`default_two_way_last`) the second piece's reduce-scatter waits behind the
    first one's less, and the first two pieces run both ways: 8 servers 1.0321 → 1.0303
    (two pieces alone, with the all-gathers one way: 1.0333, unchanged).

    >>> default_two_way_first(Fraction(0), False), default_two_way_first(Fraction(1, 20), False)
    (2, 0)
    """
    return TWO_WAY_FIRST_PIECES if sliver == 0 and not halving else 0


def default_two_way_last(sliver: Fraction, halving: bool) -> int:
    """Last pieces whose network all-gathers run both ways although the rings run one way.

    The run ends with the last piece's network all-gather among the healthy servers,
    ``N_h − 1`` hops of 14 µs one way (8 servers, half the NICs lost: six hops, 112 of
    the last 135 µs). Both ways it takes about half the hops. Each owner then sends its
    shard on two connections at once, and on the rings' own connections those transfers
    queued behind, and held up, the other pieces' (1 GiB, 8 servers: 1.0359 / 1.0362 with
    the last 1 / 2 pieces, 1.0631 with 32, against 1.0333); on connections of their own
    (channel ``rail + 2G``) the last 4 / 8 / 16 pieces took 1.0321. Where the straggler
    owns nothing, with :func:`default_two_way_first`'s two pieces, × the bound, half the
    NICs lost, off / on: 1 GiB, 4 servers 1.0215 / 1.0212, 5 servers 1.0270 / 1.0278, 6
    servers 1.0298 / 1.0280, 7 servers 1.0301 / 1.0283, 8 servers 1.0333 / 1.0303; 256
    MiB, 4 servers 1.0862 / 1.0846, 5 servers 1.1085 / 1.1088, 6 servers 1.1193 /
    1.1119, 8 servers 1.1331 / 1.1213. Where it owns a sliver it lost (8 servers, 1 / 2
    lost: 1.0278 → 1.0300, 1.0325 → 1.0373), so 0 there; and with halving 0. Where the
    rings already run both ways (16 servers) it changes nothing.

    >>> default_two_way_last(Fraction(0), False), default_two_way_last(Fraction(1, 20), False)
    (4, 0)
    """
    return TWO_WAY_LAST_PIECES if sliver == 0 and not halving else 0


def default_straggler_two_way(sliver: Fraction, size: Fraction) -> bool:
    """Whether the degraded servers' NVLink ring all-gathers run both ways by default:
    where they own no sliver, or below :data:`STRAGGLER_ONE_WAY_MIN_BYTES`.

    Both ways the straggler's all-gathers take half the hops, which was measured where it
    owns nothing (half the NICs lost, 1 GiB: 4 servers 1.0233 → 1.0215 × the bound).
    Where it owns a sliver they ran one way before that change, and both ways lost on 6
    servers from 256 MiB on, one way / both ways: 2 of 8 NICs lost 1.1196 / 1.1715 (256
    MiB), 1.0425 / 1.1168 (1 GiB); every NIC at 7/8 1.1274 / 1.1384, 1.0645 / 1.0782; at
    3/4 1.1191 / 1.1262, 1.0538 / 1.0585. On 7 servers within 0.5 % either way, on 8
    the same; at 64 and 128 MiB mixed (2 % either way), so unchanged there.

    >>> default_straggler_two_way(Fraction(0), Fraction(2**30))
    True
    >>> default_straggler_two_way(Fraction(1, 20), Fraction(2**30))
    False
    >>> default_straggler_two_way(Fraction(1, 20), Fraction(2**27))
    True
    """
    return sliver == 0 or size < STRAGGLER_ONE_WAY_MIN_BYTES


def hier_ring(
    b: Builder,
    servers: Sequence[ServerInfo],
    pieces: int,
    size: Fraction,
    *,
    net_window: int = 0,
    spacing: float | None = None,
    egress_window: int | None = None,
    bidirectional: bool | None = None,
    merge: int = 1,
    flat_last: int | None = None,
    stage: bool = True,
    sliver: Fraction | None = None,
    shard_order: bool = True,
    flat_gate: bool = True,
    network: str = RING,
    sliver_lag: int | None = None,
    two_way_first: int | None = None,
    two_way_last: int | None = None,
    straggler_two_way: bool = True,
    sliver_gate: int | None = None,
    nvlink_rs: str = RING,
    direct_first: int = 0,
) -> list[PipeClass]:
    """Add the hierarchical ring AllReduce of the whole buffer to ``b`` (see the module docs).

    ``servers`` must pass :func:`hier_ring_blocker`
    (two healthy servers among them); ``size`` (bytes) scales the ordering estimates
    and the default egress window. ``net_window`` and ``egress_window`` (in pieces, 0 =
    off) hold the straggler's partials back (``egress_window`` default
    :func:`default_egress_window`);
    ``spacing`` sets the id order (default :data:`DEFAULT_SPACING`, with the rings both
    ways :data:`TWO_WAY_SPACING`); ``bidirectional`` runs the rings both ways (default:
    from :data:`TWO_WAY_MIN_HEALTHY` healthy servers of :data:`TWO_WAY_MIN_GPUS` GPUs or
    more on). ``flat_last``: the last pieces' NVLink all-gather is flat on the healthy
    servers, every holder copying straight to every GPU (default :func:`default_flat_tail`). ``merge``: the
    NVLink rings move up to this many consecutive shards as one
    transfer (fewer transfers to simulate, but a shard then waits for its whole run:
    8 × 8 GPUs, 4 NICs lost, 1 GiB, ``merge`` 1 / 2 / 4 / 7: 5.588 / 5.600 / 5.629 /
    5.860 ms). ``stage``: the straggler's partials land on a staging GPU of the owner's
    server and are folded into the owner over NVLink after the network ring
    (:func:`staging_gpu`); without it they go straight to the owner. ``sliver``: the part
    of every class each degraded server owns (default :func:`default_sliver`; 0 = none);
    ``sliver_lag``: the straggler returns the results of piece ``k``'s sliver after its
    partials of piece ``k + sliver_lag`` (default :func:`default_sliver_lag`; see the
    module docs). ``sliver_gate``: the other servers' partials of piece ``k``'s sliver
    wait until the degraded server has sent its partials of piece ``k − sliver_gate``
    from the GPU they land on (0 = off; default ``net_window + sliver_lag``): else the
    healthy servers, which nothing holds to the degraded server's pace, fill its ingress
    with slivers of pieces far ahead, its results come back slower, its window holds
    its partials back, and the run ends with its backlog (6 × 4 GPUs, 1 NIC lost, 4 GiB:
    1.104 × the bound without the gate, 1.023 with it).
    ``shard_order``: each healthy server's NVLink passes move the shards in the order
    its network ring needs them (reduce-scatter) and they arrive (all-gather), by
    :func:`ring_steps`; else in owner order on every server (with ``merge`` above 1 the
    runs follow the chunk ids, i.e. owner order, either way).
    ``flat_gate``: each holder's flat copies wait for its sends of the last ring
    all-gather over NVLink (else they start as soon as their shards arrive and take the
    holder's NVLink port from the ring all-gathers still ahead of them).
    ``nvlink_rs``: each server's NVLink reduce-scatter as a ring (:data:`RING`, ``G − 1``
    NVLink hops per piece) or by recursive halving (:data:`HALVING`, ``⌈log2 G⌉`` hops,
    the same bytes): for small buffers, whose time is mostly latency
    (:func:`default_nvlink_rs`).
    ``direct_first``: the first pieces whose network passes are :data:`DIRECT` whatever
    ``network`` says (:func:`default_direct_first`).
    ``network``: :data:`RING` (rings among the healthy servers, one way or both),
    :data:`HALVING` (recursive halving and doubling,
    :meth:`~resilientcc.schedules._build.Builder.halving_pass`: ``⌈log2 N_h⌉`` network
    steps per pass instead of ``N_h − 1`` or about half that, and ``N_h log N_h``
    transfers per class and piece instead of ``N_h²``) or :data:`DIRECT` (one hop each
    way: in the reduce-scatter each healthy server copies its partial of a shard to a
    GPU of its own on the owner's server, beside the degraded servers' staging GPUs
    (the last adds it into the owner itself), and a binomial NVLink tree on
    :data:`FOLD_CHANNEL` folds them into the owner; with more senders than GPUs the
    later ones add into the earlier copies; in the
    all-gather each owner copies its shard to every other server; the degraded
    servers' NVLink all-gathers are then flat too, with ``flat_last``: for small
    buffers, whose time is mostly latency).
    ``two_way_first``: where the rings run one way, the first this many pieces' network
    reduce-scatters run both ways (default :func:`default_two_way_first`).
    ``two_way_last``: where the rings run one way, the last this many pieces' network
    all-gathers run both ways, on connections of their own (default
    :func:`default_two_way_last`).
    ``straggler_two_way``: the straggler's NVLink ring all-gathers run both ways (about
    half the hops; each GPU receives the same bytes; not merged).
    Returns the classes of every piece.
    """
    check_network(network)
    check_network(nvlink_rs, "nvlink_rs", NVLINK_PASSES)
    lag_default = default_sliver_lag(pieces) if sliver_lag is None else sliver_lag
    if sliver_gate is None:
        sliver_gate = default_sliver_gate(net_window, lag_default)
    if egress_window is None:
        egress_window = default_egress_window(size, pieces)
    if flat_last is None:
        flat_last = default_flat_tail(size, pieces)
    g = servers[0].nics
    slow = [sv for sv in servers if not sv.healthy]
    degraded = slow[0] if slow else None
    # every degraded server is decoupled, each owning a sliver where it can
    stragglers = [sv.index for sv in slow]
    owners = [sv.index for sv in servers if sv.healthy]
    if len(owners) < 2:
        raise ScheduleError("optcc: the hierarchical ring needs two healthy servers")
    no = len(owners)
    direct = network == DIRECT
    halving = network == HALVING or direct  # passes that are not rings
    if bidirectional is None:
        bidirectional = default_bidirectional(servers, halving)
    if halving and bidirectional:
        raise ScheduleError(f"optcc: the {network} network runs one way (bidirectional=False)")
    if spacing is None:
        spacing = TWO_WAY_SPACING if bidirectional else DEFAULT_SPACING
    # steps of one network pass (reduce-scatter or all-gather) of a class's ring
    hops = no // 2 if bidirectional else no - 1
    # with halving: a level's bytes in shards (the other half of the first split; a
    # level's estimate is its latency plus those bytes, in ring steps' units below)
    halving_sizes = [len(lv[0][1]) for lv in halving_splits(no)]

    def net_pass(
        ring: list[int],
        shards: list[list[int]],
        channel: int,
        op: str,
        at: float,
        i: int,
        both: bool = False,
        one_hop: bool = False,
    ) -> None:
        """One network pass of class ``i`` over the owners' ring, one way or both (also
        where ``both``), or halving, or direct (also where ``one_hop``)."""
        step = net_step[i]
        if direct or one_hop:
            direct_pass(ring, shards, channel, op, at, i)
        elif halving:
            levels = level_time[i] if op == REDUCE else level_time[i][::-1]
            offsets = [sum(levels[:x]) for x in range(len(levels))]
            b.halving_pass(
                ring,
                shards,
                channel,
                op,
                net=True,
                release=at,
                level_release=offsets,
            )
        elif bidirectional or both:
            b.ring_pass_two_way(ring, shards, channel, op, net=True, release=at, step_release=step)
        elif op == REDUCE:
            b.ring_reduce_scatter(ring, shards, channel, net=True, release=at, step_release=step)
        else:
            b.ring_all_gather(ring, shards, channel, net=True, release=at, step_release=step)

    def direct_pass(
        ring: list[int], shards: list[list[int]], channel: int, op: str, at: float, i: int
    ) -> None:
        """The direct network pass of class ``i``: the all-gather's owners copy their
        shards straight to the others; in the reduce-scatter every other member copies
        its partial of a shard to a GPU of its own on the owner's server (PXN from the
        rail's NIC), the last of them adds it into the owner itself, and where there are
        more senders than GPUs the later ones add theirs into the earlier ones' copies;
        a binomial NVLink tree then folds the copies into the owner. Senders go in
        rotated order, so at first each NIC sends to another owner."""
        n = len(ring)
        if op == COPY:
            for j in range(1, n):
                for y in range(n):
                    for c in shards[y]:
                        b.add(ring[y], ring[(y + j) % n], c, COPY, channel, net=True, release=at)
            return
        spots = direct_spots[i]
        used: dict[int, list[int]] = {y: [] for y in range(n)}
        for j in range(1, n):
            for y in range(n):
                dst = spots[y][(j - 1) % len(spots[y])]
                first = dst != ring[y] and dst not in used[y]
                if first:
                    used[y].append(dst)
                for c in shards[y]:
                    b.add(
                        ring[(y - j) % n],
                        dst,
                        c,
                        COPY if first else REDUCE,
                        channel,
                        net=True,
                        release=at,
                    )
        fold = at + fold_delay  # the tree's part of level_time after it
        for y, owner in enumerate(ring):
            for c in shards[y]:
                b.tree_reduce([owner, *used[y]], c, channel=FOLD_CHANNEL, release=fold)

    alive_d = list(degraded.alive) if degraded is not None else []
    owner_pos = {t: x for x, t in enumerate(owners)}
    w = default_sliver(servers) if sliver is None else Fraction(sliver)
    if not 0 <= w < 1:
        raise ScheduleError(f"optcc: the straggler's sliver must be in [0, 1), got {w}")
    classes = hier_ring_classes(servers, w)
    first_both = default_two_way_first(w, halving) if two_way_first is None else two_way_first
    if first_both < 0:
        raise ScheduleError(f"optcc: two_way_first must be at least 0, got {two_way_first}")
    last_both = default_two_way_last(w, halving) if two_way_last is None else two_way_last
    if last_both < 0:
        raise ScheduleError(f"optcc: two_way_last must be at least 0, got {two_way_last}")
    unlike = not degraded_alike(servers)
    if w and (not stragglers or unlike or any(cl.rail_d < 0 for cl in classes)):
        raise ScheduleError(
            "optcc: a sliver needs degraded servers alike whose dead rails are cut, not dealt"
        )
    if len(stragglers) * w >= 1:
        raise ScheduleError(
            f"optcc: {len(stragglers)} degraded servers' slivers of {w} leave no ring part"
        )
    piece = Fraction(1, pieces)
    nbytes = float(size)

    def rail_of(cl: PipeClass, s: int, t: int, k: int = 0) -> int:
        """The rail on which a degraded server ``s`` exchanges owner ``t``'s shard of ``cl``
        in piece ``k``: the class's rail where alive (always on a healthy ``s``), else its
        ``rail_d`` where alive, else dealt (:func:`exchange_rail`; degraded servers that
        differ deal anew every piece)."""
        sv = servers[s]
        if cl.rail in sv.alive and not (cl.crossed and cl.rail_d in sv.alive):
            return cl.rail
        if cl.rail_d >= 0 and cl.rail_d in sv.alive:
            return cl.rail_d
        return exchange_rail(sv, cl.rail, owner_pos[t], no, k if unlike else None)

    # where degraded servers that differ deal some shards, their rails change every piece
    turning = unlike and any(
        cl.rail not in servers[s].alive and cl.rail_d not in servers[s].alive
        for cl in classes
        for s in stragglers
    )

    def gpu(s: int, cl: PipeClass, t: int, k: int = 0) -> int:
        return servers[s].rail_rank(rail_of(cl, s, t, k))

    local_rings = nvlink_rings(servers)
    stage = stage and g > max(1, len(stragglers))
    position = {s: {r: i for i, r in enumerate(ring)} for s, ring in local_rings.items()}
    keys = [(i, t) for i in range(len(classes)) for t in owners]
    # the same every piece: where each shard sits in each server's NVLink ring, the
    # owners' ring of each class, and the estimated seconds of a piece's healthy-NIC
    # time, an NVLink ring step and each class's network ring step
    slots = {s: [pos[gpu(s, classes[i], t)] for i, t in keys] for s, pos in position.items()}
    members = [[gpu(t, cl, t) for t in owners] for cl in classes]
    # where the x-th degraded server's partial of each shard lands: its staging GPU (the
    # x-th after the first, each partial on a GPU of its own), or the owner itself
    lands = {
        (i, t, x): staging_gpu(local_rings[t], owner, x) if stage else owner
        for i in range(len(classes))
        for t, owner in zip(owners, members[i], strict=True)
        for x in range(len(stragglers))
    }

    def direct_spots_of(i: int, t: int, owner: int) -> list[int]:
        """Where owner ``t``'s server takes the other members' partials of class ``i`` in
        the direct pass: its GPUs but the degraded servers' staging ones, the owner last
        (the sender it gets adds straight into the owner's own partial, which the tree's
        adds then wait for)."""
        held = {lands[(i, t, x)] for x in range(len(stragglers))} if stage else set()
        return [r for r in local_rings[t] if r != owner and r not in held] + [owner]

    direct_spots = {  # the same every piece
        i: [direct_spots_of(i, t, owner) for t, owner in zip(owners, members[i], strict=True)]
        for i in range(len(classes))
        if direct or direct_first
    }
    per_piece = nbytes / pieces * (2 * no - 1) / no / g / LINE_NIC_BW
    nvl_step = NVL_LAT + nbytes / pieces / g / LINE_NVL_BW
    net_step = [
        spacing * (NET_LAT + float(piece * cl.size / no) * nbytes / LINE_NIC_BW) for cl in classes
    ]
    # with halving, each level's estimate: its latency plus its shards' bytes, spaced
    level_time = [
        [
            spacing * (NET_LAT + x * float(piece * cl.size / no) * nbytes / LINE_NIC_BW)
            for x in halving_sizes
        ]
        for cl in classes
    ]
    # direct: every shard at once, the tree folding the staged partials released a
    # spaced latency later (``fold_delay``), the pass estimated at that plus all the
    # shards' bytes and a step per level of the tree
    fold_delay = spacing * (NET_LAT + nvl_step)
    tree_time = math.ceil(math.log2(no)) * spacing * nvl_step
    direct_time = [
        fold_delay
        + spacing * (no - 1) * float(piece * cl.size / no) * nbytes / LINE_NIC_BW
        + tree_time
        for cl in classes
    ]
    if direct:
        level_time = [[x] for x in direct_time]
    pass_time = [sum(lt) for lt in level_time] if halving else [hops * st for st in net_step]
    returns_into: dict[tuple[int, int], list[int]] = {}
    sent_from: dict[tuple[int, int], list[int]] = {}
    # who exchanges each degraded server's sliver with it: the owners, then the other
    # degraded servers
    parts = [owners + [x for x in stragglers if x != sd] for sd in stragglers]
    # the rail on which each of them exchanges each class's sliver with the x-th degraded
    # server: they take its alive rails in turn, from the class's own, so that the
    # partials reach it on every alive NIC and land on its GPUs directly (the same every
    # piece)
    sliver_rail = (
        {
            (i, x, t): alive_d[(alive_d.index(cl.rail_d) + y) % len(alive_d)]
            for i, cl in enumerate(classes)
            for x in range(len(stragglers))
            for y, t in enumerate(parts[x])
        }
        if w
        else {}
    )
    # where each class's sliver of the x-th degraded server sits in each server's NVLink
    # ring: on the others, the GPU of the rail it crosses to that server; on it, the
    # class's GPU
    thin_slots = (
        {
            (i, x): {
                **{t: position[t][servers[t].rail_rank(sliver_rail[(i, x, t)])] for t in parts[x]},
                sd: position[sd][servers[sd].rail_rank(cl.rail_d)],
            }
            for i, cl in enumerate(classes)
            for x, sd in enumerate(stragglers)
        }
        if w
        else {}
    )

    # the order in which each server's NVLink passes move the shards (indices into keys,
    # the same every piece): with ``shard_order`` on the healthy servers, the order the
    # network ring needs them there (reduce-scatter) and they arrive (all-gather), ties
    # (a two-way ring's two directions) broken by the owner's offset, so that every
    # healthy server does the same relative to itself; else owner order
    rs_order = {s: list(range(len(keys))) for s in slots}
    ag_order = {s: list(range(len(keys))) for s in slots}
    if shard_order:
        need = ring_steps(no, bidirectional, REDUCE, network)
        arrive = ring_steps(no, bidirectional, COPY, network)
        pos = [owner_pos[t] for _i, t in keys]  # each shard's owner's ring position
        for s in slots:
            if s in stragglers:
                continue
            j = owner_pos[s]
            rs_order[s].sort(key=lambda e: (need[(j, pos[e])], (pos[e] - j) % no))
            ag_order[s].sort(key=lambda e: (arrive[(j, pos[e])], (pos[e] - j) % no))
    # ``sliver_lag``: the slivers of every piece, (class, degraded server's position,
    # chunk, piece, release of its broadcast); their results are returned after the loop,
    # once its partials of piece k + lag are known
    lagged: list[tuple[int, int, int, int, float]] = []

    def add_sliver_head(k: int, thin: dict[tuple[int, int], int]) -> None:
        """Piece ``k``'s slivers up to their sums on their degraded servers, each pass its
        own (``sliver_lag``).

        Each other server sums its partial of a class's sliver on the GPU of the rail it
        crosses to the sliver's degraded server ``d``, in an NVLink ring of its own; the
        partials are added into ``d``'s GPUs of those rails *before* ``d``'s own ring over
        them (on :data:`SLIVER_CHANNEL`), which carries them to the class's GPU with
        ``d``'s part; a binomial broadcast gives every GPU of ``d`` the result.
        """
        at = k * per_piece

        def on(s: int, own: bool) -> list[list[int]]:
            """Server ``s``'s slivers by NVLink ring slot: its own, or those it adds to."""
            out: list[list[int]] = [[] for _ in range(g)]
            for (i, x), c in thin.items():
                if (s == stragglers[x]) if own else (s in parts[x]):
                    out[thin_slots[(i, x)][s]].append(c)
            return out

        for s in (*owners, *stragglers):
            # each sums its server's partials on the GPUs of the rails they cross
            b.ring_reduce_scatter(
                local_rings[s], on(s, False), 0, release=at, step_release=nvl_step
            )
        t_land = at + (g - 1) * nvl_step
        for (i, x), c in thin.items():  # added into d's GPUs before d's own pass reads them
            sd = stragglers[x]
            for t in parts[x]:
                rail = sliver_rail[(i, x, t)]
                lands_on = servers[sd].rail_rank(rail)
                paced = sent_from.get((k - sliver_gate, lands_on), ()) if sliver_gate else ()
                b.add(
                    servers[t].rail_rank(rail),
                    lands_on,
                    c,
                    REDUCE,
                    rail,
                    net=True,
                    release=t_land,
                    deps=paced,
                )
        t_sum = t_land + net_step[0]
        for sd in stragglers:
            b.ring_reduce_scatter(
                local_rings[sd], on(sd, True), SLIVER_CHANNEL, release=t_sum, step_release=nvl_step
            )
        t_bcast = t_sum + (g - 1) * nvl_step
        for (i, x), c in thin.items():
            sd = stragglers[x]
            holder = servers[sd].rail_rank(classes[i].rail_d)
            rest = [r for r in local_rings[sd] if r != holder]
            b.tree_bcast([holder, *rest], c, channel=SLIVER_CHANNEL, release=t_bcast, flat=False)
            lagged.append((i, x, c, k, t_bcast))

    def add_sliver_tail(lag: int) -> None:
        """The slivers' results back to the other servers, piece ``k``'s after its degraded
        server's partials of piece ``k + lag``, and each one's flat NVLink broadcast."""
        for i, x, c, k, t_bcast in lagged:
            sd = stragglers[x]
            gate_piece = min(pieces - 1, k + lag)
            # no earlier in the id order than the partials they wait for (released at
            # their piece's network stage) and d's broadcast of the result
            at = max(gate_piece * per_piece + (g - 1) * nvl_step + pass_time[i], t_bcast)
            for t in parts[x]:
                rail = sliver_rail[(i, x, t)]
                src, dst = servers[sd].rail_rank(rail), servers[t].rail_rank(rail)
                gate = sent_from.get((gate_piece, src), ())
                b.add(src, dst, c, COPY, rail + g, net=True, release=at, deps=gate)
            for t in parts[x]:
                y = servers[t].rail_rank(sliver_rail[(i, x, t)])
                rest = [r for r in local_rings[t] if r != y]
                b.tree_bcast(
                    [y, *rest], c, channel=SLIVER_CHANNEL, release=at + net_step[0], flat=True
                )

    b.order_by_release = True
    # each server's transfers of its latest ring all-gather over NVLink (``flat_gate``)
    last_ring_ag: dict[int, range] = {}
    for k in range(pieces):
        t0 = k * per_piece
        ring_part = 1 - len(stragglers) * w
        chunk = {(i, t): b.chunk(piece * classes[i].size * ring_part / no) for i, t in keys}
        groups: dict[int, list[list[int]]] = {s: [[] for _ in range(g)] for s in local_rings}
        ag_groups: dict[int, list[list[int]]] = {s: [[] for _ in range(g)] for s in local_rings}
        if turning and k:
            for s in stragglers:  # their dealt shards move to other GPUs
                slots[s] = [position[s][gpu(s, classes[i], t, k)] for i, t in keys]
        for s, slot in slots.items():
            for e in rs_order[s]:
                groups[s][slot[e]].append(chunk[keys[e]])
            for e in ag_order[s]:
                ag_groups[s][slot[e]].append(chunk[keys[e]])
        # the straggler's slivers: one chunk per class, on every owner on the GPU of the
        # rail it crosses to the straggler, on the straggler on the class's GPU
        thin = (
            {
                (i, x): b.chunk(piece * cl.size * w)
                for i, cl in enumerate(classes)
                for x in range(len(stragglers))
            }
            if w
            else {}
        )
        if thin:
            add_sliver_head(k, thin)
        for s, ring in local_rings.items():
            if nvlink_rs == HALVING:
                b.halving_pass(ring, groups[s], 0, REDUCE, release=t0, level_release=nvl_step)
                continue
            b.ring_reduce_scatter(
                ring, groups[s], 0, release=t0, step_release=nvl_step, merge=merge
            )
        t_net = t0 + (g - 1) * nvl_step
        # the last pieces' all-gathers both ways, on connections of their own
        late = k >= pieces - last_both and not (bidirectional or halving)
        for i, cl in enumerate(classes):
            shards = [[chunk[(i, t)]] for t in owners]
            for x, sd in enumerate(stragglers):
                for t in owners:
                    src = gpu(sd, cl, t, k)
                    deps = list(returns_into.get((k - net_window, src), ()) if net_window else ())
                    if egress_window:
                        deps += sent_from.get((k - egress_window, src), ())
                    tid = b.add(
                        src,
                        lands[(i, t, x)],
                        chunk[(i, t)],
                        COPY if stage else REDUCE,
                        rail_of(cl, sd, t, k),
                        net=True,
                        deps=deps,
                        release=t_net,
                    )
                    sent_from.setdefault((k, src), []).append(tid)
            hop = k < direct_first
            net_pass(members[i], shards, cl.rail, REDUCE, t_net, i, k < first_both, hop)
            t_back = t_net + (direct_time[i] if hop else pass_time[i])
            if stage:  # fold the staged partials in last, over NVLink
                for x in range(len(stragglers)):
                    for t, owner in zip(owners, members[i], strict=True):
                        b.add(
                            lands[(i, t, x)],
                            owner,
                            chunk[(i, t)],
                            REDUCE,
                            STAGE_CHANNEL,
                            release=t_back,
                        )
            for sd in stragglers:
                for t in owners:
                    dst = gpu(sd, cl, t, k)
                    tid = b.add(
                        gpu(t, cl, t),
                        dst,
                        chunk[(i, t)],
                        COPY,
                        rail_of(cl, sd, t, k) + g,
                        net=True,
                        release=t_back,
                    )
                    returns_into.setdefault((k, dst), []).append(tid)
            net_pass(
                members[i], shards, cl.rail + (2 if late else 1) * g, COPY, t_back, i, late, hop
            )
        t_ag = t_net + 2 * max(pass_time)
        for s, ring in local_rings.items():
            # each holder to every GPU (on the degraded servers too with the direct network)
            if k >= pieces - flat_last and (s not in stragglers or direct):
                after = last_ring_ag.get(s, ()) if flat_gate else ()
                b.flat_all_gather(ring, ag_groups[s], 1, release=t_ag, after=after)
                continue
            if s in stragglers and straggler_two_way:
                b.ring_pass_two_way(
                    ring, ag_groups[s], 1, COPY, release=t_ag, step_release=nvl_step
                )
                continue
            last_ring_ag[s] = b.ring_all_gather(
                ring, ag_groups[s], 1, release=t_ag, step_release=nvl_step, merge=merge
            )
    if lagged:
        add_sliver_tail(lag_default)
    return classes
