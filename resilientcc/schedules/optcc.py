"""OptCC: a pipelined, bandwidth-aware AllReduce around degraded servers.

Designed from the lower bound (DESIGN.md §4). With one straggler at ``β·B`` among ``N``
servers of egress ``B``, ``T_LB = M/B · max(1/β, 2(N−1)/(N−1+β))``. Every variant below
gives each server ``t`` a share ``w_t`` of every piece (:func:`balanced_shares`: the
bound's water-filling, 0 for a straggler with ``β ≤ β* = (N−1)/(2N−3)``) and moves the
bytes the bound says are necessary; they differ in how the bytes travel, which sets how
close the simulated time comes to the bound. :func:`optcc` picks the variant from the
topology, and each can be asked for.

**Direct** (:mod:`~resilientcc.schedules.direct`; the default where none of the others
can run: servers with unlike GPU or NIC counts, or several degraded servers too unlike to
be seen alike by :func:`alike_view` where decoupling them all costs more than
:data:`UNLIKE_RING_MAX_EXCESS`). Four pipelined
stages with one network hop each way: the servers reduce each shard over NVLink trees,
send their partials straight to its owner, which reduces and broadcasts them and sends
the result straight back. A straggler that owns nothing is *decoupled* (it gets the
others' sum back at once and adds its own), so its egress and ingress both stream.
Where several degraded servers differ, the shares and each pair's rails come from a
linear program over every NIC (:mod:`~resilientcc.schedules.rail_split`) where that
lowers the busiest NIC by more than :data:`RAIL_LP_MIN_GAIN`.

**Pipelined hierarchical** (:mod:`~resilientcc.schedules.hier_pipeline`; the default up
to :data:`PIPELINE_MAX_SERVERS` servers with no degraded server, and below
:data:`SLIVER_MIN_SERVERS` servers with one that owns a shard, whose NICs are lost or
all slowed alike (up to :data:`ONE_DEAD_PIPELINE_MAX_SERVERS` with one NIC of 8 lost);
where it owns nothing the hierarchical ring below is, and so it is from
:data:`SLIVER_MIN_SERVERS` servers on). Intra-server ring
reduce-scatter, the one-hop network exchange with the same shares, and a ring
all-gather, pipelined over up to 64 pieces so that
NVLink and the NICs are busy at once (1 GiB, 4 × 8 GPUs: 4.243 ms without failures,
1.02 × the bound; 1 NIC lost 4.482 ms, 1.07 ×, where the schedules below took 5.627;
8 × 8 GPUs: 4.866 ms without failures, 0.92 × NCCL's ring; 1 NIC lost 5.189 ms, 2 lost
5.394, where the split below took 5.854 and 6.353; 4 lost 5.815, where the decoupled
direct schedule above took 6.620, and on 4 servers 5.685 against its 5.887; with the
network stage's credit window, :func:`~resilientcc.schedules.hier_pipeline.default_net_window`).

**Rings plus a decoupled tail** (exactly one degraded server, coupled regime). The direct
schedule's transfers grow as ``N²`` and its dependency chains with them; a fraction ``f``
of the buffer runs instead on NCCL-style flat rings over the NICs alive everywhere
(:func:`~resilientcc.schedules._build.nic_rings`), and ``1 − f`` on the decoupled direct
schedule with only the healthy servers as owners. ``DirectPlan``'s rail weights count the
rings' load on the common rails (``base_load``). It is OptCC's default above
:data:`PIPELINE_MAX_SERVERS` servers where neither the hierarchical ring nor the weighted
ring below runs, and below with ``pipeline=False``. Above
:data:`~resilientcc.schedules.direct.DEEP_MAX_SERVERS` servers ``f = β``, the part the straggler can carry at full
rate (1 GiB, 8 servers, 1 NIC lost: 5.854 ms against 6.724 ms for the direct schedule
alone); up to it ``f = 2β − 1``, from
the direct schedule alone at ``β = ½`` to rings alone at ``β = 1`` (4 servers, 1 and 2
NICs lost: 5.635 → 5.627 and 5.994 → 5.867 ms at 1 GiB, 1.554 → 1.471 and 1.653 → 1.488
ms at 256 MiB; with ``pipeline=False`` there, the pipelined variant being the default).

**Hierarchical ring** (:mod:`~resilientcc.schedules.hier_ring`; the default where one
server has lost whole NICs, from :data:`SLIVER_MIN_SERVERS` servers on, and wherever one
degraded server, its NICs lost or all slowed alike, is too slow to own a shard,
``β ≤ β*``). The
pipelined hierarchical schedule with the network stage run as rings among the healthy
servers (one flow per NIC and direction, not ``N²``), the straggler decoupled: it owns
no shard of the rings, sends its partial of each shard straight to the owner and gets
the result straight back. Where it can own a part (``β > β*``) it owns a *sliver* of
every class, exchanged in one hop with every owner and sized so that its NICs and the
healthy ones are loaded for the same time, the bound's placement
(:func:`~resilientcc.schedules.hier_ring.default_sliver`; 1 GiB, 8 servers, 1 / 2 NICs
lost: 4.988 / 5.145 ms, 1.045 / 1.061 × the bound, where the pipelined schedule took
5.189 / 5.394; 16 servers, 1 lost: 5.299 where the decoupled ring took 5.483). Before
the sliver, 1 GiB, 16 × 8 GPUs, 1 / 2 / 4 NICs lost: 5.483 / 5.480 / 5.585 ms, against
5.884 (weighted ring), 6.376 (rings plus tail) and 7.489 (direct); 4 and 8 servers with
4 lost (no sliver there, ``β ≤ β*``): 5.497 and 5.569 ms against the pipelined
schedule's 5.685 and 5.815 (but 8 servers, 2 lost, where the straggler owns a share
there, without the sliver: 5.839 against 5.394).
Its pipeline depth is :func:`~resilientcc.schedules.hier_ring.default_ring_pieces`
(smaller pieces on fewer servers); from 8 healthy servers on its rings run both ways.
A straggler whose NICs all run at half speed, 1 GiB: 5.515 ms on 4 servers (1.03 × the
bound) and 5.764 on 16 (1.07 ×, 64 pieces and spacing 3), where the direct schedule took
6.587 and 7.118. Several degraded servers alike are each decoupled, each with its
sliver where it can own one; it is the default for them from :data:`SLIVER_MIN_SERVERS`
servers on where they own nothing, from :data:`SEVERAL_SLIVER_MIN_SERVERS` where they
own slivers, and where they own a share but no sliver sizes balance the NICs from
:data:`SEVERAL_RING_ANY_SERVERS` servers on, or from :data:`SEVERAL_RING_MIN_SERVERS`
where decoupling costs at most :data:`SEVERAL_RING_MAX_EXCESS` (:func:`decoupled_excess`);
elsewhere they get the pipelined schedule (1 GiB, two of 8 servers with half their NICs
lost: 1.030 × the bound against 1.127; two of 16 with 2 of 8 lost: 1.051 against
1.303). Several degraded servers that differ, where :func:`alike_view` gives up, are
each decoupled too, without slivers, on rails' parts sized by a small linear program
(:func:`~resilientcc.schedules.hier_ring.unlike_sizes`): the default wherever that
loads the busiest NIC at most :data:`UNLIKE_RING_MAX_EXCESS` above the bound's
water-filling (:func:`unlike_excess`), and the direct schedule elsewhere (1 GiB, 8
servers, 2 / 4 NICs lost on one and every NIC at half speed on another: 1.125 / 1.038 ×
the bound against 1.302 / 1.294; with parts of the rails the first lost exchanged on
rails both kept, :func:`~resilientcc.schedules.hier_ring.unlike_crossed`). Below
:data:`UNLIKE_DIRECT_MIN_BYTES`, where the direct schedule pipelines badly, clusters with
three healthy servers or more, no fewer than the degraded ones, see them alike where that
costs less than decoupling (:func:`alike_view`) or run the ring up to
:data:`UNLIKE_RINGS_MAX_EXCESS` (:func:`unlike_rings`; 8 servers, NICs 0, 3 and 5 lost on
three, 256 MiB: 1.722 → 1.212 × the bound, seen alike).

**Ordered rings** (:mod:`~resilientcc.schedules.ordered_rings`; several degraded
servers that differ, where :func:`ordered_rings_wins`). Balance's rings with the servers
in the order whose narrowest hop is widest, so that degraded servers which lost
different NICs do not meet on the few rails both kept. They replace the direct schedule
from :data:`ORDERED_RINGS_MIN_SERVERS` servers and :data:`ORDERED_RINGS_MIN_BYTES` on
where their estimate is low enough (6 servers, NICs 0, 3 and 7 lost on three and all at
7/8 on a fourth, 256 MiB: the direct schedule 2.558 × the bound, 1.625 with its trees
balanced, the rings 1.428, Balance 1.468), and the hierarchical schedules where the
view they need costs more than the rings' estimate (8 servers, the same failures: 1.515
→ 1.233).

**Weighted ring** (:mod:`~resilientcc.schedules.weighted_ring`; the default above
:data:`PIPELINE_MAX_SERVERS` servers when the one degraded server keeps more than 3/4 of
the bandwidth and the hierarchical ring cannot run, e.g. its NICs are all alive but
slower). Balance's rings, with the segments of the positions just after the
straggler's network hops enlarged so that those hops carry ``β`` times a healthy hop's
bytes: every NIC is then loaded for the same time, 1.004 × the fault-free ring's bytes
on 16 × 8 GPUs with 1 of 8 NICs lost (simulated 5.884 ms, 1.10 × the fault-free ring,
against 6.220 for the rings plus tail: the unequal segments leave the NICs ~9 % idle).

OptCC sees every degraded server through
:func:`~resilientcc.schedules._build.usable_view`: of alive NICs that differ in
bandwidth it uses only the fastest ones worth using (one NIC at half speed among eight
is left out, as if dead: 1 GiB, 4 × 8 GPUs, 9.813 → 4.481 ms).

With no degraded server OptCC is the pipelined hierarchical schedule up to
:data:`PIPELINE_MAX_SERVERS` servers (0.81 × NCCL's ring on 4 × 8 GPUs at 1 GiB, 0.92 ×
on 8 × 8); above, the hierarchical ring up to :data:`HEALTHY_HIER_RING_MAX_BYTES`, and
above that up to :data:`HEALTHY_DIRECT_MAX_SERVERS` servers the hierarchical ring with
the direct network pass (:func:`healthy_network`; 16 × 8 GPUs, 1 GiB: 0.96 × NCCL's
ring), NCCL's ring beyond (the direct schedule measures 1.12 × the ring there), so
at ``β = 1`` it is at most 0.967 × the fault-free ring on 2–8 servers from 1 MiB to 512
MiB (pieces of 4 MiB on up to 4 NVLink lanes:
:func:`~resilientcc.schedules.hier_pipeline.default_healthy_pieces`,
:func:`~resilientcc.schedules.hier_pipeline.default_healthy_lanes`; with 8 MiB pieces on
one lane it was up to 1.10 × on 2 servers at 64 MiB and 1.020 × on 8 at 256 MiB, with 16
MiB pieces up to 1.003 ×).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from resilientcc._gc import gc_paused
from resilientcc.errors import ScheduleError
from resilientcc.schedules._build import (
    NET_LAT,
    NVL_LAT,
    Builder,
    ServerInfo,
    common_rails,
    generator_args,
    nic_rings,
    restricted,
    server_view,
    usable_view,
)
from resilientcc.schedules.direct import (
    DEEP_MAX_SERVERS,
    DirectPlan,
    default_pieces,
    direct_allreduce,
    piece_weights,
)
from resilientcc.schedules.hier_pipeline import (
    default_healthy_lanes,
    default_healthy_pieces,
    default_net_window,
    default_own_lag,
    default_pipeline_flat_tail,
    default_relay_sum,
    hier_pipeline,
    pipeline_blocker,
    pipeline_depth,
    pipeline_relay,
)
from resilientcc.schedules.hier_ring import (
    DIRECT,
    HALVING,
    NVLINK_PASSES,
    RING,
    check_network,
    default_bidirectional,
    default_direct_first,
    default_flat_tail,
    default_ring_pieces,
    default_sliver,
    default_sliver_gate,
    default_sliver_lag,
    default_straggler_two_way,
    default_two_way_first,
    default_two_way_last,
    degraded_alike,
    hier_ring_blocker,
    unlike_sizes,
)
from resilientcc.schedules.hier_ring import hier_ring as hier_ring_schedule
from resilientcc.schedules.ir import Schedule
from resilientcc.schedules.ordered_rings import ordered_rings as ordered_rings_schedule
from resilientcc.schedules.ordered_rings import rings_estimate
from resilientcc.schedules.rail_split import plan_nic_time, rail_split
from resilientcc.schedules.ring import ring
from resilientcc.schedules.ring_order import best_server_order, order_throughput
from resilientcc.schedules.weighted_ring import weighted_ring as weighted_ring_schedule
from resilientcc.schedules.weighted_ring import weighted_ring_applies
from resilientcc.topology.model import Topology
from resilientcc.units import format_size, to_size

__all__ = [
    "ALIKE_RINGS_SLACK",
    "ALIKE_SLACK",
    "ALIKE_WIDE_SLACK",
    "FALLBACK_TREES_MIN_BYTES",
    "FALLBACK_TREES_TWO_MAX_BYTES",
    "FALLBACK_TREES_TWO_MIN_BYTES",
    "HALVING_MIN_SERVERS",
    "HALVING_PIECES",
    "HEALTHY_DIRECT_MAX_SERVERS",
    "HEALTHY_DIRECT_MIN_SERVERS",
    "HEALTHY_HIER_RING_MAX_BYTES",
    "HEALTHY_RINGS_MIN_GPUS",
    "HEALTHY_RING_MIN_SERVERS",
    "NO_SLIVER_MAX_BYTES",
    "NVLINK_HALVING_MAX_BYTES",
    "ONE_DEAD_PIPELINE_MAX_SERVERS",
    "ONE_GPU_TREES_MAX_BYTES",
    "ONE_GPU_TREES_MIN_BYTES",
    "ONE_GPU_TREES_MIN_SHARE",
    "ONE_SERVER_TREES_MIN_GPUS",
    "ORDERED_RINGS_FEW_ESTIMATE",
    "ORDERED_RINGS_FEW_SMALL_BYTES",
    "ORDERED_RINGS_FEW_SMALL_ESTIMATE",
    "ORDERED_RINGS_FOUR_SMALL_ESTIMATE",
    "ORDERED_RINGS_MAX_BYTES_ESTIMATE",
    "ORDERED_RINGS_MIN_BYTES",
    "ORDERED_RINGS_MIN_SERVERS",
    "ORDERED_RINGS_SLOWED_VIEW_FACTOR",
    "ORDERED_RINGS_SMALL_MIN_SERVERS",
    "ORDERED_RINGS_VIEW_FACTOR",
    "ORDERED_RINGS_WIDE_ESTIMATE",
    "ORDERED_RINGS_WIDE_MIN_BYTES",
    "PIECES_REFERENCE_BW",
    "PIPELINE_MAX_SERVERS",
    "RAIL_LP_MIN_GAIN",
    "RINGS_DIRECT_MAX_SERVERS",
    "RINGS_MAX_LATENCY_RATIO",
    "RINGS_ONE_NIC_MAX_LATENCY_RATIO",
    "SCALED_MIN_SERVERS",
    "SCALED_PIECES",
    "SEVERAL_BALANCED_MIN_SERVERS",
    "SEVERAL_HIER_RING_MAX_BYTES",
    "SEVERAL_HIER_RING_MIN_SERVERS",
    "SEVERAL_RING_ANY_SERVERS",
    "SEVERAL_RING_MAX_EXCESS",
    "SEVERAL_RING_MIN_SERVERS",
    "SEVERAL_SLIVER_MIN_SERVERS",
    "SLIVER_MIN_SERVERS",
    "SMALL_DIRECT_MAX_SERVERS",
    "SMALL_HIER_RING_MAX_BYTES",
    "SMALL_NETWORK_MAX_BYTES",
    "SMALL_PIECES",
    "TREES_MAX_GPUS",
    "TREES_MIN_BYTES",
    "TREES_MIN_DEGRADED",
    "TREES_SMALL_MAX_GPUS",
    "TREES_SMALL_MIN_BYTES",
    "UNLIKE_DIRECT_MIN_BYTES",
    "UNLIKE_RINGS_MAX_EXCESS",
    "UNLIKE_RINGS_MIN_HEALTHY",
    "UNLIKE_RING_MAX_EXCESS",
    "VARIANTS",
    "VARIANT_LABELS",
    "VARIANT_OPTIONS",
    "VariantChoice",
    "alike_view",
    "balanced_shares",
    "choose_variant",
    "decoupled_excess",
    "default_nvlink_rs",
    "depth_bytes",
    "fallback_trees_rule",
    "healthy_network",
    "healthy_rings",
    "hier_ring_rule",
    "lone_healthy_view",
    "one_gpu_trees_rule",
    "optcc",
    "optcc_view",
    "ordered_rings_wins",
    "packs_trees",
    "pieces_bytes",
    "read_at",
    "ring_latency_ratio",
    "ring_options",
    "rings_pay",
    "several_hier_ring",
    "small_hier_ring",
    "small_network",
    "small_only",
    "split_fraction",
    "trees_rule",
    "two_gpus_rule",
    "uneven_loss",
    "uneven_trees_rule",
    "unlike_excess",
    "unlike_rings",
    "unlike_trees",
    "water_filling_time",
]

#: from this many servers on, a straggler that lost whole NICs gets the hierarchical ring
#: (with its sliver, :func:`~resilientcc.schedules.hier_ring.default_sliver`), not the
#: pipelined schedule (7 until the sliver's results were lagged,
#: :func:`~resilientcc.schedules.hier_ring.default_sliver_lag`)
SLIVER_MIN_SERVERS = 6

#: but with one NIC of 8 lost the pipelined schedule (with the straggler's relay and its
#: results after its partials) up to this many servers
ONE_DEAD_PIPELINE_MAX_SERVERS = 6

#: several degraded servers (alike) get the hierarchical ring, each decoupled: from
#: :data:`SLIVER_MIN_SERVERS` servers on where they own nothing, and from this many on
#: where they own a share, each then owning its sliver
#: (:func:`~resilientcc.schedules.hier_ring.default_sliver`)
SEVERAL_SLIVER_MIN_SERVERS = 7
#: where they own a share but no sliver sizes balance the NICs (``default_sliver`` 0:
#: the healthy NICs carry more than the bound's share, :func:`decoupled_excess`), from
#: this many servers on if that excess is at most :data:`SEVERAL_RING_MAX_EXCESS`, and
#: from :data:`SEVERAL_RING_ANY_SERVERS` on in any case (the pipelined schedule's ``N²``
#: flows cost more and more)
SEVERAL_RING_MIN_SERVERS = 12
SEVERAL_RING_MAX_EXCESS = Fraction(1, 20)
SEVERAL_RING_ANY_SERVERS = 16
#: several degraded servers, up to this many bytes: the hierarchical ring wherever it can
#: run, in place of the direct schedule (:func:`several_hier_ring`) and, from
#: :data:`SEVERAL_HIER_RING_MIN_SERVERS` servers on, of the pipelined one (degraded
#: servers alike). Every variant simulated (:func:`resilientcc.sim.tune.tune`), random
#: patterns of two to four degraded servers on 4 to 12 servers, × the bound: at 32, 64
#: and 128 MiB the ring was faster than the direct schedule in 20 of 20 patterns (by
#: 0.4-44 %), than the pipelined one from 6 servers on in 7 of 7 (2-23 %); on 5 servers
#: slower than the pipelined one (13 %, 1 of 1), and slower than the ordered rings where
#: their rule picks them (6 servers, 128 MiB: 24 and 35 %, 2 of 2; that rule comes
#: first); at 256 MiB it was 12.6 % slower to 5.7 % faster than the direct schedule
SEVERAL_HIER_RING_MAX_BYTES = 128 * 2**20
SEVERAL_HIER_RING_MIN_SERVERS = 6

#: OptCC's default is the pipelined hierarchical schedule up to this many servers (where
#: it can run); its transfers grow as ``pieces · N² · G²``: 0.5 to 1.2 million on 8 × 8
#: GPUs at 64 pieces (up to three minutes to simulate with the Python loop), four times
#: that on 16 servers
PIPELINE_MAX_SERVERS = 8

#: from this many servers on, the hierarchical ring's defaults are cut down so that its
#: transfers stay in the hundreds of thousands: :data:`SCALED_PIECES` pieces, each
#: NVLink pass moving a GPU's shards in one run (``nvlink_merge``) and no flat tail. At
#: its full depth (:func:`~resilientcc.schedules.hier_ring.default_ring_pieces`) the
#: transfers grow as ``pieces · N² · G²``: 2.9 million on 16 × 8 GPUs (39 s to generate,
#: minutes to simulate), about 12 million on 32 and 190 million on 128. 1 GiB, half the
#: NICs of one server lost, 32 servers, 8 / 16 / 32 pieces: 1.245 / 1.136 / 1.105 × the
#: bound (167,104 / 334,208 / 668,416 transfers); 48 servers, 16 / 32 pieces: 1.155 /
#: 1.128 × (698,752 / 1,397,504 transfers, generated in 13 / 23 s and simulated in 12 /
#: 25 s by the compiled loop)
SCALED_MIN_SERVERS = 24
SCALED_PIECES = 32
#: from this many servers on (with :data:`SCALED_MIN_SERVERS`'s cut-down defaults) the
#: healthy servers run recursive halving and doubling instead of rings
#: (``network``): ``N log N`` network transfers per piece instead of ``N²``. 64 servers,
#: as above: rings at 8 pieces 1.259 × (597,184 transfers, 177 s), halving at 8 / 16
#: pieces 1.304 / 1.234 × (152,128 / 304,256, 62 / 140 s with the Python loop)
HALVING_MIN_SERVERS = 64
#: the pieces of the cut-down ring from :data:`HALVING_MIN_SERVERS` servers on (1024 GPUs:
#: 647,552 transfers, 1.234 × the bound, about 9 s to generate and 8-9 s to simulate)
HALVING_PIECES = 16

#: degraded servers that differ get the hierarchical ring, each decoupled, where its
#: busiest NIC is at most this far above the bound's water-filling (:func:`unlike_excess`);
#: else the direct schedule
UNLIKE_RING_MAX_EXCESS = 0.09

#: :func:`alike_view` gives up at most this fraction of the water-filling time to see
#: several degraded servers alike: the pipelined schedule it enables measured 1.18-1.26 ×
#: the bound where the direct schedule took 1.26-1.49 × (4 × 8 GPUs, 256 MiB)
ALIKE_SLACK = Fraction(1, 10)
#: below this many bytes, where :data:`UNLIKE_RINGS_MIN_HEALTHY` servers or more are
#: healthy, degraded servers that differ are seen alike where that costs the
#: water-filling less than decoupling each would and at most :data:`ALIKE_RINGS_SLACK`
#: (:func:`alike_view`), else get the hierarchical ring, each decoupled, where that
#: costs at most :data:`UNLIKE_RINGS_MAX_EXCESS` (:func:`unlike_rings`)
UNLIKE_DIRECT_MIN_BYTES = 2**29
UNLIKE_RINGS_MIN_HEALTHY = 3
ALIKE_RINGS_SLACK = Fraction(3, 10)
UNLIKE_RINGS_MAX_EXCESS = 0.22
#: from :data:`UNLIKE_DIRECT_MIN_BYTES` on they are seen alike where that costs at most
#: this much and less than decoupling each would (with that many healthy servers)
ALIKE_WIDE_SLACK = Fraction(1, 6)

#: the direct schedule runs the rail program's plan (:mod:`~resilientcc.schedules.rail_split`)
#: where the default plan's busiest NIC is more than this fraction above the program's
RAIL_LP_MIN_GAIN = 0.2

#: several degraded servers that differ get Balance's rings in the server order whose
#: narrowest hop is widest (:mod:`~resilientcc.schedules.ordered_rings`) from this many
#: bytes on (:func:`ordered_rings_wins`; below, their latency is too long)
ORDERED_RINGS_MIN_BYTES = 64 * 2**20
#: in place of the direct schedule from this many servers on (on 4 servers the direct
#: schedule measured 1.37-1.43 × the bound at 256 MiB, the rings 1.57-1.75)
ORDERED_RINGS_MIN_SERVERS = 5
#: below :data:`ORDERED_RINGS_FEW_SMALL_BYTES` from this many servers on, on fewer than
#: :data:`ORDERED_RINGS_MIN_SERVERS` where the estimate is at most
#: :data:`ORDERED_RINGS_FOUR_SMALL_ESTIMATE`
ORDERED_RINGS_SMALL_MIN_SERVERS = 4
#: 4 servers, 128 and 192 MiB, against the direct schedule with
#: :data:`~resilientcc.schedules.direct.SEVERAL_MID_PIECES` pieces at 128 MiB: the rings
#: won in the 6 patterns with an estimate up to 1.45 (by 1.6-6.7 %), split 1 / 1 at
#: 1.453, and lost in 11 of the 13 from 1.5 to 1.59 (by 0.7-14 %; won 2 by up to 2.7 %).
#: With 4 pieces at 128 MiB the bar was 1.6
ORDERED_RINGS_FOUR_SMALL_ESTIMATE = 1.45
#: above :data:`~resilientcc.schedules.direct.DEEP_MAX_SERVERS` servers where their
#: bytes' time is at most this much over the water-filling (the narrowest hop more than
#: half a healthy one's, about): the direct schedule took 1.6-2.1 × the bound at 256 and
#: 512 MiB on 7-12 servers, the rings 1.25-1.45
ORDERED_RINGS_MAX_BYTES_ESTIMATE = 1.7
#: from this many bytes on only where the rings' estimate is at most
#: :data:`ORDERED_RINGS_WIDE_ESTIMATE`: there the direct schedule pipelines well (1 GiB,
#: 7 and 8 servers: 1.31-1.37 × the bound, the rings 1.36-1.54; 5 and 6 servers, with
#: the rail program's plan: 1.33-1.36, the rings 1.33-1.50 where their estimate was
#: 1.28-1.44)
ORDERED_RINGS_WIDE_MIN_BYTES = 2**30
ORDERED_RINGS_WIDE_ESTIMATE = 1.3
#: up to :data:`~resilientcc.schedules.direct.DEEP_MAX_SERVERS` servers, where the direct
#: schedule balances its trees only with several degraded servers
#: (:data:`SEVERAL_BALANCED_MIN_SERVERS`) and then took 1.43-1.87 × the bound at 256 and
#: 512 MiB, only where the rings' estimate is at most this, or at most
#: :data:`ORDERED_RINGS_FEW_SMALL_ESTIMATE` below 256 MiB (128 MiB: the direct schedule
#: 1.87-2.53, the rings 1.38-1.62 in the seven patterns up to 1.57)
ORDERED_RINGS_FEW_ESTIMATE = 1.45
ORDERED_RINGS_FEW_SMALL_ESTIMATE = 1.6
ORDERED_RINGS_FEW_SMALL_BYTES = 2**28
#: in place of the hierarchical schedules where the view they need costs the
#: water-filling ``c`` (:func:`alike_view`), when the rings' estimate is below this
#: factor times ``c``: seen alike, clusters whose degraded servers lost whole NICs took
#: 1.09-1.22 ``c`` at 256 MiB, and at 1 GiB 1.09-1.13 ``c``
ORDERED_RINGS_VIEW_FACTOR = 1.05
#: below :data:`UNLIKE_DIRECT_MIN_BYTES`, where a degraded server runs on slowed NICs
#: (1.27-1.32 ``c`` at 256 MiB)
ORDERED_RINGS_SLOWED_VIEW_FACTOR = 1.15

#: with several degraded servers the direct schedule balances its intra-server trees
#: (``balance``) from this many servers on, as above :data:`DEEP_MAX_SERVERS`: 5 and 6
#: servers, 256 MiB, 2.08-2.40 × the bound → 1.48-1.77 in 12 of 15 random patterns,
#: 1-4 % slower in 2; on 4 servers it was up to 7 % slower
SEVERAL_BALANCED_MIN_SERVERS = 5

#: small buffers: up to this many bytes OptCC's hierarchical ring crosses the network in
#: one hop each way (:func:`small_network`)
SMALL_NETWORK_MAX_BYTES = 32 * 2**20
#: on up to this many servers (above, recursive halving from :data:`HALVING_MIN_SERVERS`)
SMALL_DIRECT_MAX_SERVERS = HALVING_MIN_SERVERS - 1
#: and up to this many bytes OptCC runs the hierarchical ring wherever it can
#: (:func:`small_hier_ring`)
SMALL_HIER_RING_MAX_BYTES = 16 * 2**20
#: the hierarchical ring's pieces for such buffers (below :data:`SCALED_MIN_SERVERS`
#: servers). Measured, µs, 2 (the rings' depth there) / 4 / 8 / 16 pieces: 8 × 8 GPUs,
#: 1 NIC lost, 1 / 4 / 16 MiB 76.5 / 74.7 / 73.9 / 73.4, 95.5 / 89.5 / 85.8 / 83.8, 175.8 /
#: 180.6 / 166.3 / 165.2; 16 × 8, 1 lost, 4 / 16 MiB 129.1 / 122.9 / 119.6 / 117.8,
#: 215.9 / 194.5 / 200.4 / 200.9; 4 × 8, 4 lost, 16 MiB 225.7 / 192.8 / 178.2 / 172.2
SMALL_PIECES = 8
#: with no degraded server above :data:`PIPELINE_MAX_SERVERS` servers, the hierarchical
#: ring up to this many bytes (above, NCCL's ring from :data:`HEALTHY_DIRECT_MAX_SERVERS`
#: servers on)
HEALTHY_HIER_RING_MAX_BYTES = 256 * 2**20
#: with no degraded server the hierarchical ring's network pass is direct
#: (:func:`healthy_network`) from this many servers on up to
#: :data:`HEALTHY_HIER_RING_MAX_BYTES`, and at every size up to
#: :data:`HEALTHY_DIRECT_MAX_SERVERS` servers (where OptCC was NCCL's ring above it)
HEALTHY_DIRECT_MIN_SERVERS = 12
HEALTHY_DIRECT_MAX_SERVERS = 20
#: below :data:`HEALTHY_DIRECT_MIN_SERVERS` servers the direct pass up to
#: :data:`HEALTHY_HIER_RING_MAX_BYTES` too where servers have fewer GPUs than this
HEALTHY_RINGS_MIN_GPUS = 8
#: no degraded server: the hierarchical ring (rings between the servers) from this many
#: servers on, up to :data:`PIPELINE_MAX_SERVERS`, with :data:`HEALTHY_RINGS_MIN_GPUS`
#: GPUs per server or more (:func:`healthy_rings`)
HEALTHY_RING_MIN_SERVERS = 8
#: where the network pass is direct (:func:`small_network`), the degraded servers own no
#: sliver up to this many bytes
NO_SLIVER_MAX_BYTES = 16 * 2**20
#: and each server reduces inside by recursive halving up to this many bytes
#: (:func:`default_nvlink_rs`)
NVLINK_HALVING_MAX_BYTES = 8 * 2**20


#: OptCC's tree packing on a cluster (:func:`trees_rule`): from this many degraded
#: servers that differ, on up to :data:`TREES_MAX_GPUS` GPUs, from
#: :data:`TREES_MIN_BYTES` (from :data:`TREES_SMALL_MIN_BYTES` on up to
#: :data:`TREES_SMALL_MAX_GPUS` GPUs); asked for (``trees=True``) on up to
#: TREES_MAX_GPUS GPUs
TREES_MIN_DEGRADED = 3
TREES_MAX_GPUS = 40
TREES_MIN_BYTES = 128 * 2**20
TREES_SMALL_MAX_GPUS = 32
TREES_SMALL_MIN_BYTES = 32 * 2**20
#: where OptCC's other rules leave only the direct schedule, on three servers or more,
#: the tree packing from this many bytes read at the fastest server's pace
#: (:func:`pieces_bytes`), by the number of GPUs: ``(at most this many GPUs, from this
#: many bytes)``, up to :data:`TREES_MAX_GPUS` GPUs (where they leave NCCL's ring, at
#: any size; :func:`fallback_trees_rule`)
FALLBACK_TREES_MIN_BYTES: tuple[tuple[int, int], ...] = (
    (8, 2**20),
    (16, 2 * 2**20),
    (24, 8 * 2**20),
    (TREES_MAX_GPUS, 32 * 2**20),
)
#: on two servers (one of them degraded), from this many bytes read at the fastest
#: server's pace (:func:`pieces_bytes`: the size times 400 GB/s over its bandwidth,
#: where that is slower) up to :data:`FALLBACK_TREES_TWO_MAX_BYTES`
FALLBACK_TREES_TWO_MIN_BYTES = 2 * 2**20
FALLBACK_TREES_TWO_MAX_BYTES = 128 * 2**20
#: on one server, the tree packing in place of NCCL's ring from this many GPUs on (at
#: any size; on two GPUs the ring is one transfer each way)
ONE_SERVER_TREES_MIN_GPUS = 3
#: on servers of one GPU each (three or more, up to :data:`TREES_MAX_GPUS`), the tree
#: packing in place of the layered schedules from this many bytes up to the next
#: (:func:`one_gpu_trees_rule`), where no server has less than this share of the
#: fastest one's bandwidth
ONE_GPU_TREES_MIN_BYTES = 2**20
ONE_GPU_TREES_MAX_BYTES = 32 * 2**20
ONE_GPU_TREES_MIN_SHARE = Fraction(1, 4)

#: on two servers of one GPU each, one slower than the other (:func:`two_gpus_rule`),
#: with the size read at the slower GPU's pace (the size times 400 GB/s over its
#: bandwidth): NCCL's ring from :data:`TWO_GPUS_RING_MIN_BYTES` where the slower has at
#: most :data:`TWO_GPUS_RING_MAX_SHARE` of the faster one's bandwidth, the direct
#: schedule from :data:`TWO_GPUS_DIRECT_MIN_BYTES` where it has more
TWO_GPUS_RING_MAX_SHARE = Fraction(1, 2)
TWO_GPUS_RING_MIN_BYTES = 8 * 2**20
TWO_GPUS_DIRECT_MIN_BYTES = 32 * 2**20
#: where a server's alive NICs differ in speed and the layered schedules' view drops
#: bandwidth (:func:`uneven_loss`, :func:`uneven_trees_rule`), the tree packing on up
#: to :data:`TREES_MAX_GPUS` GPUs: on two servers from :data:`UNEVEN_TREES_TWO_MIN_BYTES`,
#: on three or more from :data:`UNEVEN_TREES_MIN_BYTES` where some server loses at
#: least :data:`UNEVEN_TREES_MIN_LOSS` of its bandwidth so, up to
#: :data:`UNEVEN_TREES_MAX_BYTES`
UNEVEN_TREES_TWO_MIN_BYTES = 8 * 2**20
UNEVEN_TREES_MIN_BYTES = 16 * 2**20
UNEVEN_TREES_MIN_LOSS = Fraction(1, 5)
UNEVEN_TREES_MAX_BYTES = 128 * 2**20


def unlike_trees(topology: Topology) -> bool:
    """Whether :func:`trees_rule`'s condition on the cluster holds, whatever the size: at
    least :data:`TREES_MIN_DEGRADED` degraded servers, not all alike (the same NICs alive
    at the same bandwidths), on at most :data:`TREES_MAX_GPUS` GPUs.

    >>> from resilientcc.topology import apply_fail_specs, hierarchical
    >>> unlike_trees(apply_fail_specs(hierarchical(4, 8), ["0:nic0", "1:nic3", "2:nic5"]))
    True
    >>> unlike_trees(apply_fail_specs(hierarchical(4, 8), ["0:1", "1:1", "2:1"]))
    False
    """
    return _unlike_degraded(topology) > 0


def _unlike_degraded(topology: Topology) -> int:
    """The number of degraded servers where :func:`unlike_trees` holds, else 0."""
    if topology.num_ranks > TREES_MAX_GPUS:
        return 0
    degraded = [sv for sv in server_view(topology) if not sv.healthy]
    kinds = {
        (sv.alive, tuple(sv.nic_bw[c] for c in sv.alive) if sv.nic_bw else ()) for sv in degraded
    }
    return len(degraded) if len(degraded) >= TREES_MIN_DEGRADED and len(kinds) >= 2 else 0


def uneven_loss(topology: Topology) -> Fraction:
    """The largest share of a server's network bandwidth that OptCC's layered schedules
    leave unused where its alive NICs differ in speed (0 where none do): they see a
    server's NICs alike, so :func:`~resilientcc.schedules._build.usable_view` keeps the
    fastest NICs that together carry the most and drops the rest.

    >>> from resilientcc.topology import hierarchical, scale_server_nics
    >>> t = scale_server_nics(hierarchical(3, 2), 1, Fraction(1, 2), nics=[1])
    >>> uneven_loss(t), uneven_loss(hierarchical(3, 2))
    (Fraction(1, 3), Fraction(0, 1))
    """
    raw = server_view(topology)
    return max(
        (1 - u.egress / s.egress for s, u in zip(raw, usable_view(raw), strict=True) if s.egress),
        default=Fraction(0),
    )


def trees_rule(topology: Topology, size: Fraction) -> str | None:
    """Why OptCC runs the tree packing on a server cluster, or ``None``: at least
    :data:`TREES_MIN_DEGRADED` degraded servers, not all alike (:func:`unlike_trees`),
    on at most :data:`TREES_MAX_GPUS` GPUs, from :data:`TREES_SMALL_MIN_BYTES` on up to
    :data:`TREES_SMALL_MAX_GPUS` GPUs and from :data:`TREES_MIN_BYTES` above. Where
    :func:`ordered_rings_wins` gives the ordered rings their turn they still run (4
    servers, every NIC at 7/8, NIC 2 at half speed, NIC 5 at 3/4, 128 MiB: the rings
    1.476 × the bound, the trees 1.517).

    There the layered schedules run the direct schedule, or see the degraded servers
    alike at a cost, and the packing prices every link. Measured, × the bound, OptCC's
    other rules against the trees, on random patterns of ``benchmarks/bench_tune.py``'s
    losses (4 × 8 GPUs): three or four degraded servers, 128 / 256 MiB / 1 GiB, 10
    patterns: trees faster in 10 / 10 / 9 (median gain at 256 MiB 0.14 × the bound; the
    loss 1.221 against 1.253 at 1 GiB); 8 more at 256 MiB: 8 of 8 (e.g.
    ``0:nic1+1:nic6+2:1+3:6`` 1.307 → 1.176), at 64 MiB 7 of 8; 5 × 8 GPUs, 256 MiB: 5
    of 6 (1.355 against 1.359 the loss, ``0:nic1+1:nic2x1/2+2:1+3:6`` 1.636 → 1.224).
    With the rule, against it off, 40 patterns each of 4 and 5 servers: 256 MiB 37
    faster of the 39 it changed (median −10.2 %, worst +7.1 %), 128 MiB 36 of 38
    (median −15.6 %, worst +6.4 %).
    Two degraded servers stay with the layered rules (4 of 4 faster there, e.g.
    ``0:nic0+1:nic3`` 1.239 against 1.319), as do 8 × 8 GPUs (1.421 against 1.637:
    the lanes thin out under the transfer cap) and one-GPU servers of a builder.

    Below 128 MiB the trees' edge grows as the GPUs get fewer (their trees are
    shallower, their lanes wider): on the random audit's clusters where the condition
    holds (``benchmarks/bench_unlike_trees.py``; the trees' time over OptCC's other
    variant, geometric mean), seeds 0–1599 and the large draw's 1000–1299, at 32 MiB the
    trees won 17 of 18 on up to 24 GPUs (0.806), 11 of 12 on 25–32 (0.927) and 5 of 8
    on 33–40 (1.012); at 64 MiB 18 of 20 (0.872), 8 of 12 (0.924) and 3 of 10 (0.969);
    at 16 MiB 11 of 15 on up to 24 GPUs but none of 9 on 25–32. Held out (seeds
    1600–3199 and the large draw's 1300–1599, every case where the condition holds): on
    up to 32 GPUs the trees won 53 of 57 at 32 MiB and 49 of 57 at 64 MiB (worst 1.067
    and 1.108), on 33–40 GPUs 6 of 14 and 7 of 14.

    >>> from resilientcc.topology import apply_fail_specs, hierarchical
    >>> t = apply_fail_specs(hierarchical(4, 8), ["0:nic0", "1:nic3", "2:nic5"])
    >>> trees_rule(t, Fraction(2**25)) is not None, trees_rule(t, Fraction(2**24)) is None
    (True, True)
    >>> t5 = apply_fail_specs(hierarchical(5, 8), ["0:nic0", "1:nic3", "2:nic5"])
    >>> trees_rule(t5, Fraction(2**27)) is not None, trees_rule(t5, Fraction(2**26)) is None
    (True, True)
    >>> trees_rule(apply_fail_specs(hierarchical(4, 8), ["0:1", "1:1", "2:1"]), Fraction(2**28))
    """
    small = topology.num_ranks <= TREES_SMALL_MAX_GPUS
    least = TREES_SMALL_MIN_BYTES if small else TREES_MIN_BYTES
    degraded = _unlike_degraded(topology) if size >= least else 0
    if not degraded:
        return None
    where = (
        f"up to {TREES_SMALL_MAX_GPUS}"
        if small
        else f"{TREES_SMALL_MAX_GPUS + 1} to {TREES_MAX_GPUS}"
    )
    return (
        f"{degraded} degraded servers that differ, on {where} GPUs, from"
        f" {format_size(least)}: reduce and broadcast trees packed by a linear program"
    )


def uneven_trees_rule(topology: Topology, size: Fraction) -> str | None:
    """Why OptCC runs the tree packing where a server's alive NICs differ in speed, or
    ``None``: up to :data:`TREES_MAX_GPUS` GPUs and :data:`UNEVEN_TREES_MAX_BYTES`, on two
    servers from :data:`UNEVEN_TREES_TWO_MIN_BYTES` where the layered schedules' view
    drops any bandwidth (:func:`uneven_loss`), on three servers or more from
    :data:`UNEVEN_TREES_MIN_BYTES` where it drops at least :data:`UNEVEN_TREES_MIN_LOSS`
    of some server's.

    The layered schedules see a server's NICs alike and leave the slower ones out (one
    NIC at half speed of two: a third of the server's bandwidth unused); the tree
    packing prices every link as it is. On the random audit's clusters where the view
    drops bandwidth (``benchmarks/bench_uneven_trees.py``, seeds 0–799; the trees' time
    over the rules' other variant): on two servers the trees won 11 of 21 at 4 MiB, 19
    of 21 at 8 MiB, 21 of 21 at 16 and 64 MiB and 20 of 21 at 128 MiB; on three servers
    or more where a fifth or more is dropped, 6 / 8 / 11 / 15 / 13 of 15 at 4 / 8 / 16 /
    64 / 128 MiB (geometric mean 0.86 at 16 MiB, 0.82 at 64 MiB), but below a fifth
    only 18 of 46 at 16 MiB and 25 of 46 at 64 MiB. OptCC's choice over the faster of
    the two (geometric mean) went from 1.041 to 1.021 on the fit (410 cases from 4 to 128
    MiB), and held out (seeds 800–1599, 316 cases from 8 to 128 MiB) from 1.029 to 1.021:
    34 choices moved to the trees, faster in 26 (median 0.950, worst 1.104). The tables
    are in ``docs/experiments.md``.

    >>> from resilientcc.topology import hierarchical, scale_server_nics
    >>> t = scale_server_nics(hierarchical(3, 2), 1, Fraction(1, 2), nics=[1])
    >>> tuple(uneven_trees_rule(t, Fraction(2**k)) is None for k in (23, 24, 27, 28))
    (True, False, False, True)
    >>> eight = scale_server_nics(hierarchical(3, 8), 1, Fraction(1, 2), nics=[1])
    >>> uneven_trees_rule(eight, Fraction(2**26)) is None  # drops 1/15
    True
    """
    if topology.num_ranks > TREES_MAX_GPUS or size > UNEVEN_TREES_MAX_BYTES:
        return None
    two = len(topology.servers) == 2
    if size < (UNEVEN_TREES_TWO_MIN_BYTES if two else UNEVEN_TREES_MIN_BYTES):
        return None
    loss = uneven_loss(topology)
    if not loss or (not two and loss < UNEVEN_TREES_MIN_LOSS):
        return None
    where = (
        f"two servers, from {format_size(UNEVEN_TREES_TWO_MIN_BYTES)}"
        if two
        else f"{loss} of a server's bandwidth, from {format_size(UNEVEN_TREES_MIN_BYTES)}"
    )
    return (
        f"alive NICs that differ in speed, left out by the layered schedules ({where} to"
        f" {format_size(UNEVEN_TREES_MAX_BYTES)}): reduce and broadcast trees packed by a"
        " linear program"
    )


def fallback_trees_rule(
    topology: Topology, servers: Sequence[ServerInfo], size: Fraction
) -> str | None:
    """Why OptCC runs the tree packing where its layered rules leave it only the direct
    schedule or NCCL's ring (fewer NICs than GPUs, degraded servers that differ, a
    cluster the layered schedules cannot place, a single server), or ``None``: up to
    :data:`TREES_MAX_GPUS` GPUs; on one server from :data:`ONE_SERVER_TREES_MIN_GPUS`
    GPUs, at any size; on three servers or more from :data:`FALLBACK_TREES_MIN_BYTES`
    at the fastest server's pace (:func:`pieces_bytes`), by the number of GPUs, and on
    two servers from :data:`FALLBACK_TREES_TWO_MIN_BYTES` at that pace, up to
    :data:`FALLBACK_TREES_TWO_MAX_BYTES` where a server is degraded (in place of the
    direct schedule) and at any larger size where none is (in place of NCCL's ring or
    the direct schedule).

    With no degraded server the trees ran at any size until 2026-11-28 (measured
    against NCCL's ring, below); below those thresholds the direct schedule, which
    that comparison left out, is faster. On the audit's healthy clusters where no
    layered schedule runs (seeds 0–799, 4 KiB to 16 MiB; the trees' time over the
    rules' choice without them, the direct schedule or NCCL's ring), the trees lost all
    48 cases on three servers or more of 9–40 GPUs below 1 MiB read at 400 GB/s
    (geometric means 1.29–1.81 by bin) and won 71 of 73 from 32 MiB; with the thresholds of the degraded servers OptCC's choice
    over the faster of the two went from 1.143 to 1.020 (246 cases; more than 5 % behind
    116 → 34), held out (seeds 800–1599, 312 cases) from 1.122 to 1.019 (125 → 41).

    On one server (``benchmarks/bench_fallback_trees.py --servers 1``, the 44 one-server
    clusters of seeds 0–399; 3 to 8 GPUs, NICs lost or slowed, which nothing here
    crosses) the trees beat NCCL's NVLink ring in 36 of 36 with three GPUs or more at 4
    KiB, 1 MiB, 64 MiB and 1 GiB (medians 0.764 / 0.739 / 0.933 / 0.995, the worst
    0.997), and lost all 8 with two (1.001–1.062): a ring of two is one transfer each
    way. 16 / 32 / 40 GPUs (1 GiB / 256 MiB / 64 MiB): 0.979 / 0.849 / 0.537.

    Measured on the clusters of ``scripts/random_audit.py`` where the rules fell back
    (1–10 servers of 1–8 GPUs, NICs lost or slowed; simulated, the trees' time over the
    fallback's; ``benchmarks/bench_fallback_trees.py``, the table in
    ``docs/experiments.md``): against the ring the trees won in 104 of 106 cases from 4
    KiB to 256 MiB (median 0.55 at 4 KiB); against the direct schedule in 13 of 37 at 4
    KiB, 25 of 37 at 1 MiB, 36 of 37 at 4 MiB and 152 of 162 at 8 and 64 MiB; on two
    servers with a degraded one they lost ground with size (128 MiB: 22 of 31, median
    0.975; 256 MiB: 10 of 28). Above 40 GPUs the packing takes minutes and its lanes thin out
    under the transfer cap.

    On three servers or more the trees' edge over the direct schedule shrinks as the
    GPUs grow in number (deeper trees, thinner lanes), and the bytes are read as a time
    (:func:`pieces_bytes`). On the audit's clusters where the rules leave the direct
    schedule (seeds 0–799, 1 to 16 MiB on up to 24 GPUs and 4, 32 and 64 MiB above; the
    trees' time over the direct schedule's), read at 400 GB/s the trees won 116 of 116
    from 1 MiB on up to 8 GPUs, 7 of 11 from 2 to 4 MiB and 312 of 373 above on 9–16,
    38 of 64 from 8 to 16 MiB and 147 of 180 above on 17–24 (but 15 of 58 below 8 MiB),
    and 66 of 83 from 32 MiB on 25–40 (6 of 24 below): the thresholds of
    :data:`FALLBACK_TREES_MIN_BYTES`. OptCC's choice over the faster of the two
    (geometric mean) went from 1.066 with 4 MiB of bytes to 1.021 (more than 5 % behind
    in 114 of 911 cases instead of 265). Held out, seeds 800–1599 (1037 cases, 4 and 16
    MiB added above 24 GPUs): 1.052 → 1.024 (260 → 160 behind); the rule moved 296
    choices to the trees, faster in 192 (median 0.917, worst 1.588, on 17–24 GPUs where
    8 to 16 MiB read so is a coin flip: 38 of 81), and 27 to the direct schedule,
    faster in 19.

    On two servers the bytes are read as a time, as the direct schedule's depth is: on
    servers of one NIC 1 MiB takes as long as 8 MiB on 8 × 400 Gb/s. Measured with the
    two-server clusters of the audit (seeds 0–399, 4 KiB to 32 MiB, 576 cases; the
    trees' time over the direct schedule's), read this way the trees won 28 of 84
    below 512 KiB, 56 of 107 from 512 KiB to 2 MiB, 83 of 110 from 2 to 8 MiB and 83
    of 112 from 8 to 32 MiB. OptCC's choice over the faster of the two (geometric
    mean): 1.020 from 2 MiB read as a time, 1.054 from 4 MiB read as bytes (more than
    5 % behind in 90 and 190 cases). Held out, seeds 400–1199 (795 cases, 64 KiB to
    16 MiB): 1.013 against 1.079 (72 and 299 cases behind); the rule changed 388
    choices to the trees, which were faster in 313 (median 0.909, 0.477–1.294).

    >>> from resilientcc.topology import fail_nics, hierarchical
    >>> t = hierarchical(2, 4, nics_per_server=2)
    >>> tuple(fallback_trees_rule(t, optcc_view(t), Fraction(2**k)) is None for k in (18, 20, 28))
    (True, False, False)
    >>> d = fail_nics(t, 0, [1])
    >>> tuple(fallback_trees_rule(d, optcc_view(d), Fraction(2**k)) is None for k in (17, 20, 28))
    (True, False, True)
    """
    if topology.num_ranks > TREES_MAX_GPUS:
        return None
    if len(servers) < 2:
        if topology.num_ranks < ONE_SERVER_TREES_MIN_GPUS:
            return None
        return (
            f"one server, {ONE_SERVER_TREES_MIN_GPUS} to {TREES_MAX_GPUS} GPUs: reduce and"
            " broadcast trees over NVLink packed by a linear program"
        )
    healthy = all(sv.healthy for sv in servers)
    if len(servers) == 2:
        if pieces_bytes(servers, size) < FALLBACK_TREES_TWO_MIN_BYTES:
            return None
        where = (
            f"two servers, from {format_size(FALLBACK_TREES_TWO_MIN_BYTES)} at 400 GB/s (the time)"
        )
        if not healthy:
            if size > FALLBACK_TREES_TWO_MAX_BYTES:
                return None
            where += f" to {format_size(FALLBACK_TREES_TWO_MAX_BYTES)}"
    else:
        gpus, least = next((g, b) for g, b in FALLBACK_TREES_MIN_BYTES if topology.num_ranks <= g)
        if pieces_bytes(servers, size) < least:
            return None
        where = f"up to {gpus} GPUs, from {format_size(least)} at 400 GB/s (the time)"
    lead = "no degraded server, no layered schedule" if healthy else "no layered schedule"
    return f"{lead}, {where}: reduce and broadcast trees packed by a linear program"


def one_gpu_trees_rule(
    topology: Topology, servers: Sequence[ServerInfo], size: Fraction
) -> str | None:
    """Why OptCC runs the tree packing on servers of one GPU each, or ``None``: three
    servers or more, up to :data:`TREES_MAX_GPUS`, from :data:`ONE_GPU_TREES_MIN_BYTES`
    to :data:`ONE_GPU_TREES_MAX_BYTES`, where no server has less than
    :data:`ONE_GPU_TREES_MIN_SHARE` of the fastest one's bandwidth.

    Drawn on ``hierarchical(n, 1)`` with ``n`` = 3–16 and server 0 healthy or at 1/2,
    7/8 or 1/8 of its bandwidth (the trees' time over the layered rules', 4 KiB to 32
    MiB): from 1 to 32 MiB, at 1/2 and 7/8, the trees were faster in 55 of 56 (to 0.56,
    the loss 1.037), at 4 KiB as fast (1.000–1.013), at 1/8 up to 1.26 × slower from 6
    servers on; at 64 MiB the rules won at 1/2. Held out (7, 9, 12 and 20 servers; server
    0 at 3/4, 1/4 or 5/8, or at 3/4 with server 1 at 1/2; 2, 8 and 24 MiB): the trees
    faster in 47 of 48, median 0.78, the loss 1.022 (9 servers, 1/4, 8 MiB). On the
    switch model (``uniform_switch``; 8 endpoints healthy, one at 1/2 or 7/8, 5 with
    one at 3/4; 1, 4, 16 and 32 MiB): 0.65–1.004, the trees 0.2–0.4 % slower with one
    endpoint at 1/2 below 32 MiB. The ``docs/experiments.md`` entry has the tables.

    >>> from resilientcc.topology import hierarchical, scale_server_nics
    >>> t = hierarchical(4, 1)
    >>> tuple(one_gpu_trees_rule(t, optcc_view(t), Fraction(2**k)) is None for k in (12, 20, 25, 26))
    (True, False, False, True)
    >>> slow = scale_server_nics(t, 0, Fraction(1, 8))
    >>> one_gpu_trees_rule(slow, optcc_view(slow), Fraction(2**22)) is None
    True
    """
    if len(servers) < 3 or topology.num_ranks > TREES_MAX_GPUS:
        return None
    if any(len(sv.ranks) != 1 for sv in servers):
        return None
    if not ONE_GPU_TREES_MIN_BYTES <= size <= ONE_GPU_TREES_MAX_BYTES:
        return None
    fastest = max(sv.bandwidth for sv in servers)
    if any(sv.bandwidth < ONE_GPU_TREES_MIN_SHARE * fastest for sv in servers):
        return None
    return (
        f"servers of one GPU, {format_size(ONE_GPU_TREES_MIN_BYTES)} to"
        f" {format_size(ONE_GPU_TREES_MAX_BYTES)}: reduce and broadcast trees packed by a"
        " linear program"
    )


def two_gpus_rule(servers: Sequence[ServerInfo], size: Fraction) -> VariantChoice | None:
    """OptCC's variant on two servers of one GPU each where one is slower than the other,
    or ``None`` (the pipelined schedule, the layered rules' choice there). The size is
    read at the slower GPU's pace (``size · 400 GB/s`` over its bandwidth: the time its
    link needs, in bytes at 400 GB/s). NCCL's ring from :data:`TWO_GPUS_RING_MIN_BYTES`
    so read where the slower server has at most :data:`TWO_GPUS_RING_MAX_SHARE` of the
    faster one's bandwidth; the direct schedule from :data:`TWO_GPUS_DIRECT_MIN_BYTES`
    where it has more.

    Between two GPUs every schedule moves the whole buffer each way over the slower
    GPU's link, whatever the shares (what one GPU does not send raw it sends summed), so
    only the pipeline's fill and the latency differ. NCCL's ring has no fill: its two
    steps keep both directions busy from the start. The pipelined schedule sends the
    results after the partials they wait for (at 16 MiB it stayed at 1.22 × the bound
    whatever the straggler's speed). Measured on ``hierarchical(2, 1)`` with server 0 at
    β of its bandwidth (× the bound; pipelined / direct / ring):

    | β | 1 MiB | 4 MiB | 16 MiB |
    |---|---|---|---|
    | 1/8 | 1.439 / 1.995 / 1.217 | 1.276 / 1.388 / 1.054 | 1.236 / 1.217 / 1.014 |
    | 3/8 | 1.833 / 2.105 / 1.651 | 1.345 / 1.254 / 1.163 | 1.222 / 1.056 / 1.041 |
    | 1/2 | 1.951 / 2.201 / 1.868 | 1.384 / 1.217 / 1.217 | 1.221 / 1.033 / 1.054 |
    | 3/4 | 2.016 / 2.445 / 2.302 | 1.379 / 1.200 / 1.325 | 1.224 / 1.050 / 1.081 |
    | 7/8 | 2.185 / 2.585 / 2.519 | 1.317 / 1.234 / 1.380 | 1.142 / 1.058 / 1.095 |

    At 256 KiB the ring wins from β = 1/4 down (read at the slower GPU's pace, 8 MiB
    and more), the pipelined schedule above (β = 5/16: 3.122 against 3.170); at 1 GiB
    all three are within 1.5 % of the bound (the ring 1.000–1.001).

    >>> from resilientcc.topology import hierarchical, scale_server_nics
    >>> t = scale_server_nics(hierarchical(2, 1), 0, Fraction(1, 8))
    >>> tuple(getattr(two_gpus_rule(optcc_view(t), Fraction(2**k)), "variant", None) for k in (16, 18))
    (None, 'ring')
    >>> t = scale_server_nics(hierarchical(2, 1), 0, Fraction(3, 4))
    >>> tuple(getattr(two_gpus_rule(optcc_view(t), Fraction(2**k)), "variant", None) for k in (20, 22))
    (None, 'direct')
    """
    if len(servers) != 2 or any(len(sv.ranks) != 1 for sv in servers):
        return None
    if all(sv.healthy for sv in servers):
        return None
    slow, fast = sorted(sv.bandwidth for sv in servers)
    if slow <= 0:
        return None
    read = read_at(size, slow)
    if slow <= TWO_GPUS_RING_MAX_SHARE * fast:
        if read < TWO_GPUS_RING_MIN_BYTES:
            return None
        return VariantChoice(
            "ring",
            f"two GPUs, one at most {TWO_GPUS_RING_MAX_SHARE} of the other's bandwidth, from"
            f" {format_size(TWO_GPUS_RING_MIN_BYTES)} at 400 GB/s on the slower (the time):"
            " NCCL's ring, two steps with no pipeline to fill",
        )
    if read < TWO_GPUS_DIRECT_MIN_BYTES:
        return None
    return VariantChoice(
        "direct",
        f"two GPUs, one slower than the other, from {format_size(TWO_GPUS_DIRECT_MIN_BYTES)}"
        " at 400 GB/s on the slower (the time): the direct schedule",
    )


def packs_trees(topology: Topology) -> str | None:
    """Why OptCC runs the tree packing (:mod:`~resilientcc.schedules.tree_packing`) on
    ``topology`` instead of its layered variants, or ``None``: GPUs outside servers (the
    layered variants place their stages by server), or a loaded topology whose servers
    each hold one GPU (a graph of GPUs: the layered variants' hops cross several cables
    where GPUs forward for each other; on the graphs of ``benchmarks/bench_trees.py``,
    256 MiB, OptCC's layered rules took 1.148–11.2 × the bound, the trees 1.012–1.151).
    A switch model (the ``switch`` builder) keeps the layered rules (8 endpoints, one at
    half speed, 256 MiB: 1.052 against the trees' 1.189; from 1 to 32 MiB its endpoints,
    servers of one GPU, follow :func:`one_gpu_trees_rule`).

    >>> from resilientcc.topology import hierarchical, uniform_switch
    >>> packs_trees(hierarchical(2, 2)) is None, packs_trees(uniform_switch(4)) is None
    (True, True)
    """
    if not topology.num_ranks:
        return None
    if any(g.server is None for g in topology.gpus):
        return "GPUs outside servers: reduce and broadcast trees packed by a linear program"
    if topology.param("builder") not in ("hierarchical", "switch") and all(
        len(gpus) == 1 for gpus in topology.gpus_of_server.values()
    ):
        return (
            "a graph of GPUs, a server each: reduce and broadcast trees packed by a linear program"
        )
    return None


def optcc_view(topology: Topology, size: Fraction | None = None) -> list[ServerInfo]:
    """The servers as OptCC sees them for a buffer of ``size`` bytes: alive NICs too slow
    to use left out (:func:`~resilientcc.schedules._build.usable_view`), degraded servers
    alike where that costs little (:func:`alike_view`), a lone healthy server with the
    others' alive rails on a rail fabric (:func:`lone_healthy_view`)."""
    servers = alike_view(usable_view(server_view(topology)), size)
    return lone_healthy_view(servers, topology.param("fabric", "rail") == "rail")


def small_network(servers: Sequence[ServerInfo], size: Fraction) -> str | None:
    """How the hierarchical ring's healthy servers cross the network for a small buffer:
    :data:`~resilientcc.schedules.hier_ring.DIRECT` (one hop each way) up to
    :data:`SMALL_NETWORK_MAX_BYTES` and :data:`SMALL_DIRECT_MAX_SERVERS` servers where
    three or more servers are healthy; else ``None`` (the default for the size).

    Small buffers are latency-bound: every network step costs about 14 µs, their bytes
    a few. Per pass the rings take ``⌊N_h/2⌋`` steps where they run both ways (or where
    the degraded servers own no sliver: the first and last pieces' passes then run both
    ways, :func:`~resilientcc.schedules.hier_ring.default_two_way_first`), else ``N_h −
    1``; halving ``⌈log2 N_h⌉``; the direct pass one hop per ``G − D`` senders (a GPU of
    the owner's server each, the owner included, the degraded servers' staging GPUs
    aside; further senders add into their copies), then a binomial NVLink tree into the
    owner. Even where that counts more steps than halving the direct pass was faster:
    at 4 MiB, 1 NIC lost, 32 / 48 / 64 × 8 GPUs, halving 248 / 262 / 291 µs, direct 180
    / 215 / 251.

    Measured, OptCC, µs, at 1 / 4 / 8 / 16 / 32 / 64 MiB (2 pieces), rings or halving
    (the earlier default) → direct: 8 × 8 GPUs, 1 NIC lost (rings one way, 6 steps),
    rings 198 / 225 / 188 / 273 / 318 / 434 → 100 / 121 / 139 / 175 / 265 / 412; 16 ×
    8, 1 lost, halving 172 / 194 / 219 / 279 / 349 / 459 (rings) → 114 / 132 / 159 / 212
    / 277 / 438; 4 lost 172 / 192 / 222 / 287 / 361 / 557 → 114 / 139 / 176 / 258 / 357
    / 533; 8 × 8, 4 lost (rings, 3 steps) 129 / 146 / 173 / 235 / 330 / 498 → 79 / 106 /
    146 / 211 / 335 / 508; 4 × 8, 4 lost 89 / 116 / 147 / 197 / 282 / 507 → 76 / 104 /
    143 / 193 / 281 / 531. Halving first replaced the one-way rings of 8 × 8 GPUs, 1 lost
    (4 / 16 / 64 MiB: 161 / 241 / 481). With the owner's own GPU taking a sender too, 16
    × 8 GPUs, 1 lost, 1 / 4 / 16 MiB: 108.7 / 119.6 / 200.4 → 91.2 / 102.4 / 187.7 (8
    pieces).

    >>> from resilientcc.topology import hierarchical, fail_nics
    >>> from resilientcc.schedules._build import server_view
    >>> sv = server_view(fail_nics(hierarchical(8, 8), 0, 1))
    >>> small_network(sv, Fraction(2**22)), small_network(sv, Fraction(2**26))
    ('direct', None)
    >>> small_network(server_view(fail_nics(hierarchical(3, 8), 0, 1)), Fraction(2**22))
    """
    if size > SMALL_NETWORK_MAX_BYTES or len(servers) > SMALL_DIRECT_MAX_SERVERS:
        return None
    return DIRECT if sum(1 for sv in servers if sv.healthy) >= 3 else None


def healthy_network(servers: Sequence[ServerInfo], size: Fraction) -> str | None:
    """How the hierarchical ring crosses the network on a cluster with no degraded
    server above :data:`PIPELINE_MAX_SERVERS` servers:
    :data:`~resilientcc.schedules.hier_ring.DIRECT` from
    :data:`HEALTHY_DIRECT_MIN_SERVERS` to :data:`SMALL_DIRECT_MAX_SERVERS` servers up to
    :data:`HEALTHY_HIER_RING_MAX_BYTES` (from 9 servers where they have fewer than
    :data:`HEALTHY_RINGS_MIN_GPUS` GPUs), and at every size up to
    :data:`HEALTHY_DIRECT_MAX_SERVERS` servers (OptCC then runs the hierarchical ring
    there instead of NCCL's ring, :func:`hier_ring_rule`); else ``None``.

    Without a straggler every server's NICs bind alike, and the rings' chains of network
    hops are all the pipeline's head and tail. Measured, µs, no failure, 8 GPUs per
    server: up to 256 MiB, rings → direct, 12 servers 64 / 128 / 256 MiB 436.6 / 741.7 /
    1347.7 → 415.5 / 723.3 / 1338.4, 16 servers 459.5 / 790.0 / 1406.9 → 418.1 / 732.7 /
    1361.8, 20 servers 256 MiB 1448.3 → 1386.3, 24 / 32 servers 2043.3 / 2270.0 → 1818.0
    / 1819.0 (but 10 servers 413.7 / 718.4 / 1314.7 → 412.1 / 714.6 / 1324.3); 1 GiB,
    NCCL's ring → the hierarchical ring, direct: 9 / 10 / 12 / 16 / 20 servers 5319.9 /
    5327.4 / 5338.6 / 5353.3 / 5362.3 → 5059.6 / 4967.1 / 5029.4 / 5136.7 / 5211.5 (1.021
    × the bound on 16), but 24 servers 5368.2 → 5413.3 and 8 servers (the pipelined
    schedule) 4868.3 → 5157.2. With fewer GPUs per server the rings lose below 12
    servers too, where they were slower than NCCL's ring at ``β = 1``: µs, rings /
    direct / NCCL's ring, 11 × 3 GPUs at 64 / 256 MiB 996.6 / 868.4 / 903.4 and 3381.5
    / 3308.3 / 3496.5, 10 × 2 at 64 MiB 1366.9 / 1260.8 / 1300.9, 9 × 4 at 64 MiB 735.6
    / 660.9 / 746.5; with 8 GPUs they win there (9 × 8 at 64 / 256 MiB 408.9 / 416.7 and
    1303.7 / 1344.3).

    >>> from resilientcc.topology import hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> tuple(healthy_network(server_view(hierarchical(n, 8)), Fraction(2**30)) for n in (8, 16, 24))
    (None, 'direct', None)
    >>> healthy_network(server_view(hierarchical(24, 8)), Fraction(2**28))
    'direct'
    """
    n = len(servers)
    if n <= PIPELINE_MAX_SERVERS or not all(sv.healthy for sv in servers):
        return None
    if size > HEALTHY_HIER_RING_MAX_BYTES:
        direct = n <= HEALTHY_DIRECT_MAX_SERVERS
    else:
        few_gpus = len(servers[0].ranks) < HEALTHY_RINGS_MIN_GPUS
        direct = (n >= HEALTHY_DIRECT_MIN_SERVERS or few_gpus) and n <= SMALL_DIRECT_MAX_SERVERS
    return DIRECT if direct else None


def healthy_rings(servers: Sequence[ServerInfo]) -> bool:
    """Whether OptCC runs the hierarchical ring, with rings between the servers, on a
    cluster with no degraded server of :data:`HEALTHY_RING_MIN_SERVERS` to
    :data:`PIPELINE_MAX_SERVERS` servers with :data:`HEALTHY_RINGS_MIN_GPUS` GPUs or more
    (below, the pipelined schedule; above, :func:`healthy_network`).

    Measured, × the bound, the pipelined schedule → the hierarchical ring: 8 × 8 GPUs,
    32 / 64 / 128 / 256 / 512 MiB / 1 GiB 1.967 / 1.454 / 1.228 / 1.114 / 1.064 / 1.036 →
    1.839 / 1.386 / 1.192 / 1.096 / 1.048 / 1.023; 7 × 8 at 64 / 256 MiB 1.445 / 1.110 →
    1.418 / 1.125, 6 × 8 at 128 / 256 MiB / 1 GiB 1.213 / 1.106 / 1.037 → 1.254 / 1.127 /
    1.032; 8 × 4 GPUs at 64 / 256 MiB 1.132 / 1.033 → 1.137 / 1.034, 8 × 2 at 256 MiB
    1.010 → 1.023.

    Examples:
        >>> from resilientcc.topology import hierarchical
        >>> from resilientcc.schedules._build import server_view
        >>> [healthy_rings(server_view(hierarchical(n, g))) for n, g in ((7, 8), (8, 8), (8, 4))]
        [False, True, False]
    """
    n = len(servers)
    return (
        HEALTHY_RING_MIN_SERVERS <= n <= PIPELINE_MAX_SERVERS
        and all(sv.healthy for sv in servers)
        and len(servers[0].ranks) >= HEALTHY_RINGS_MIN_GPUS
    )


def small_hier_ring(servers: Sequence[ServerInfo], size: Fraction) -> bool:
    """Whether OptCC runs the hierarchical ring for ``size`` bytes where it would
    otherwise not: up to :data:`SMALL_HIER_RING_MAX_BYTES` wherever it can
    (:func:`~resilientcc.schedules.hier_ring.hier_ring_blocker`) on servers of two GPUs
    or more, with its small-buffer
    network (:func:`small_network`), and with no degraded server above
    :data:`PIPELINE_MAX_SERVERS` servers, where OptCC is otherwise NCCL's ring, up to
    :data:`HEALTHY_HIER_RING_MAX_BYTES`.

    Measured, OptCC, µs, at 1 / 4 / 16 / 32 MiB, the pipelined schedule → the
    hierarchical ring (direct, no sliver): 4 × 8 GPUs, 1 NIC lost 101 / 112 / 172 / 234
    → 71 / 90 / 168 / 290; no failure 116 / 128 / 168 / 233 → 69 / 86 / 167 / 276; 8
    × 8, no failure 172 / 184 / 228 / 289 → 82 / 97 / 169 / 270; 6 × 8, 1 lost 129 /
    140 / 199 / 275 → 74 / 93 / 174 / 277. 16 × 8 GPUs, no failure, NCCL's ring →
    the hierarchical ring: 4 / 16 / 32 / 64 / 256 MiB 1325 / 1340 / 1359 / 1400 / 1776
    → 132 / 210 / 285 / 444 / 1372 (64 and 256 MiB with rings between the servers: 460
    / 1419).

    >>> from resilientcc.topology import hierarchical, fail_nics
    >>> from resilientcc.schedules._build import server_view
    >>> sv = server_view(fail_nics(hierarchical(4, 8), 0, 1))
    >>> small_hier_ring(sv, Fraction(2**24)), small_hier_ring(sv, Fraction(2**25))
    (True, False)
    >>> small_hier_ring(server_view(hierarchical(16, 8)), Fraction(2**28))
    True
    """
    if hier_ring_blocker(servers) is not None or len(servers[0].ranks) < 2:
        return False  # (one GPU per server: nothing to reduce inside first)
    if size <= SMALL_HIER_RING_MAX_BYTES:
        return True
    healthy = all(sv.healthy for sv in servers)
    return healthy and len(servers) > PIPELINE_MAX_SERVERS and size <= HEALTHY_HIER_RING_MAX_BYTES


def several_hier_ring(servers: Sequence[ServerInfo], size: Fraction) -> bool:
    """Whether OptCC runs the hierarchical ring where its other rules give the direct
    schedule: several degraded servers, up to :data:`SEVERAL_HIER_RING_MAX_BYTES`, where
    the ring can run (:func:`~resilientcc.schedules.hier_ring.hier_ring_blocker`: two
    healthy servers, one NIC per GPU). Every degraded server is decoupled, its rails'
    parts from :func:`~resilientcc.schedules.hier_ring.unlike_sizes`.

    Examples:
        >>> from resilientcc.topology import apply_fail_specs, hierarchical
        >>> t = apply_fail_specs(hierarchical(6, 8), ["0:nic1", "1:x3/4", "2:nic0,nic1,nic2,nic3", "3:4"])
        >>> sv = optcc_view(t, Fraction(2**26))
        >>> several_hier_ring(sv, Fraction(2**26)), several_hier_ring(sv, Fraction(2**28))
        (True, False)
    """
    return (
        size <= SEVERAL_HIER_RING_MAX_BYTES
        and len(_degraded(servers)) > 1
        and hier_ring_blocker(servers) is None
    )


def small_only(servers: Sequence[ServerInfo], size: Fraction) -> bool:
    """Whether OptCC runs the hierarchical ring on ``servers`` only because ``size`` is
    small (:func:`small_hier_ring`): for a large buffer it would run another variant.

    >>> from resilientcc.topology import hierarchical, fail_nics
    >>> from resilientcc.schedules._build import server_view
    >>> small_only(server_view(fail_nics(hierarchical(4, 8), 0, 1)), Fraction(2**22))
    True
    >>> small_only(server_view(fail_nics(hierarchical(8, 8), 0, 1)), Fraction(2**22))
    False
    """
    if not small_hier_ring(servers, size):
        return False
    shares = balanced_shares({sv.index: sv.bandwidth for sv in servers})
    return hier_ring_rule(servers, shares, Fraction(2**40)) is None


def ring_options(size: Fraction, servers: int) -> dict[str, Any]:
    """OptCC's options for the hierarchical ring with rings inside and between the
    servers at the rings' depth (:func:`~resilientcc.schedules.hier_ring.default_ring_pieces`):
    what it ran for small buffers before their defaults, which the small-buffer
    benchmark and figure set against them.

    >>> ring_options(Fraction(2**22), 8)
    {'network': 'ring', 'nvlink_rs': 'ring', 'pieces': 2}
    """
    return {"network": RING, "nvlink_rs": RING, "pieces": default_ring_pieces(size, servers)}


def default_nvlink_rs(size: Fraction) -> str:
    """The hierarchical ring's NVLink reduce-scatter: recursive halving up to
    :data:`NVLINK_HALVING_MAX_BYTES` (3 NVLink hops on 8 GPUs instead of 7), else rings.

    Measured, OptCC, µs, NVLink rings → halving: 8 × 8 GPUs, 1 NIC lost (network
    halving), 4 / 8 / 16 / 32 / 64 MiB: 161 / 188 / 241 / 316 / 481 → 149 / 172 / 238 /
    318 / 488; 16 × 8, 1 lost, 8 / 16 MiB: 232 / 279.0 → 219 / 279.4; 4 × 8, 4 lost, 4 /
    8 / 16 MiB: 127 / 154 / 197 → 116 / 147 / 190; 8 × 8, 4 lost, 16 MiB: 235 → 240.

    >>> default_nvlink_rs(Fraction(2**23)), default_nvlink_rs(Fraction(2**24))
    ('halving', 'ring')
    """
    return HALVING if size <= NVLINK_HALVING_MAX_BYTES else RING


def balanced_shares(bandwidth: Mapping[int, Fraction]) -> dict[int, Fraction]:
    """Owner shares ``w_s`` that equalise ``(1 + (N−2) w_s) / B_s`` (water-filling).

    Servers too slow to own anything get ``0`` (their time is then ``M/B_s``, the
    other term of the bound).

    >>> w = balanced_shares({0: Fraction(1, 2), 1: Fraction(1), 2: Fraction(1), 3: Fraction(1)})
    >>> w[0], w[1]
    (Fraction(0, 1), Fraction(1, 3))
    >>> balanced_shares({0: Fraction(7, 8), 1: Fraction(1), 2: Fraction(1), 3: Fraction(1)})[0]
    Fraction(11, 62)
    """
    servers = sorted(bandwidth)
    n = len(servers)
    if n == 0:
        return {}
    if n == 1:
        return {servers[0]: Fraction(1)}  # no network: its bandwidth may be zero
    if n == 2:
        tot = sum((bandwidth[s] for s in servers), Fraction(0))
        return {s: bandwidth[s] / tot for s in servers}
    active = list(servers)
    while True:
        # Σ_active (T B_s − 1) = N − 2  with T in units of M
        tot = sum((bandwidth[s] for s in active), Fraction(0))
        t = Fraction(n - 2 + len(active)) / tot
        drop = [s for s in active if t * bandwidth[s] < 1]
        if not drop:
            break
        active = [s for s in active if s not in drop]
    return {s: ((t * bandwidth[s] - 1) / (n - 2) if s in active else Fraction(0)) for s in servers}


def water_filling_time(bandwidth: Mapping[int, Fraction]) -> Fraction:
    """``max_s (1 + (N−2) w_s) / B_s`` with the shares of :func:`balanced_shares`: the
    time (in units of ``M``) of the bound's water-filling on these server bandwidths.

    >>> water_filling_time({0: Fraction(1, 2), 1: Fraction(1), 2: Fraction(1), 3: Fraction(1)})
    Fraction(2, 1)
    >>> water_filling_time({0: Fraction(1), 1: Fraction(1), 2: Fraction(1)})
    Fraction(4, 3)
    """
    n = len(bandwidth)
    if n < 2:
        return Fraction(0)  # nothing crosses a network
    w = balanced_shares(bandwidth)
    return max(((1 + (n - 2) * w[s]) / b for s, b in bandwidth.items()), default=Fraction(0))


def alike_view(servers: Sequence[ServerInfo], size: Fraction | None = None) -> list[ServerInfo]:
    """Several degraded servers that differ, seen alike: each keeps only the NICs alive on
    all of them, at the slowest of their bandwidths, if that costs the water-filling at
    most :data:`ALIKE_SLACK` (:func:`water_filling_time`); otherwise ``servers``. With a
    buffer of ``size`` bytes above the small buffers (:data:`SMALL_HIER_RING_MAX_BYTES`,
    where the hierarchical ring keeps every NIC), :data:`UNLIKE_RINGS_MIN_HEALTHY` healthy
    servers or more and a cluster the hierarchical ring can run on, also where it costs
    less than decoupling each of them would (:func:`unlike_excess`, the ring's estimate)
    and at most :data:`ALIKE_RINGS_SLACK` (:data:`ALIKE_WIDE_SLACK` from
    :data:`UNLIKE_DIRECT_MIN_BYTES` on; see :func:`unlike_rings`).

    Not where the view would leave every degraded server owning nothing while they
    outnumber the healthy servers and the ring can take them as they are
    (``_alike_buys_nothing``).

    Three of 8 × 8 GPUs that lost NIC 0, 3 and 5 (the water-filling 10.9 % slower seen
    alike, 19.9 % decoupled), × the bound: the direct schedule 1.722 at 256 MiB, 1.370 at
    1 GiB; seen alike 1.212 and 1.165; each decoupled on the ring 1.542 and 1.481 (Balance
    1.457 and 1.450). Seen alike against the direct schedule at 1 GiB, where the view
    cost 10.9-15.4 % and less than decoupling (7 patterns of three or four degraded
    servers on 8 and 12 servers): 1.165-1.319 × the bound against 1.344-1.449; above
    :data:`ALIKE_WIDE_SLACK` mixed: 8 servers, 19.2 / 21.2 / 28.3 %, 1.411 / 1.419 / 1.572
    against 1.385 / 1.368 / 1.374; 6 and 12 servers, 19.4 and 18.2 %, 1.343 and 1.323
    against 1.772 and 1.488.

    >>> from resilientcc.topology import apply_fail_specs, hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> three = server_view(apply_fail_specs(hierarchical(8, 8), ["0:nic0", "1:nic3", "2:nic5"]))
    >>> tuple(len(sv.alive) for sv in alike_view(three, Fraction(2**28))[:4])
    (5, 5, 5, 8)
    >>> tuple(len(sv.alive) for sv in alike_view(three)[:4])  # no size: the slack only
    (7, 7, 7, 8)

    The pipelined hierarchical schedule needs its degraded servers alike. Two servers of
    4 × 8 GPUs that lost NIC 0 and NIC 3 (256 MiB): 1.471 × the bound with the direct
    schedule, 1.263 × both seen without NICs 0 and 3 (the water-filling 7 % slower).

    >>> from resilientcc.topology import fail_nics
    >>> t = fail_nics(fail_nics(hierarchical(4, 8), 0, [0]), 1, [3])
    >>> view = alike_view(server_view(t))
    >>> tuple((sv.alive, sv.egress / 10**9) for sv in view[:2])
    (((1, 2, 4, 5, 6, 7), Fraction(300, 1)), ((1, 2, 4, 5, 6, 7), Fraction(300, 1)))
    >>> t = fail_nics(fail_nics(hierarchical(4, 4), 0, [0]), 1, [3])  # 1 of 4: too costly
    >>> view = alike_view(server_view(t))
    >>> tuple(sv.alive for sv in view[:2])
    ((1, 2, 3), (0, 1, 2))
    """
    slow = _degraded(servers)
    if len(slow) < 2 or len({(sv.alive, sv.egress, sv.ingress) for sv in slow}) == 1:
        return list(servers)
    common = tuple(c for c in slow[0].alive if all(c in sv.alive for sv in slow))
    if not common or any(not sv.nic_bw for sv in slow):
        return list(servers)
    tau = min(sv.nic_bw[c] for sv in slow for c in common)
    view = [sv if sv.healthy else restricted(sv, common, tau) for sv in servers]
    if _alike_buys_nothing(servers, view):
        return list(servers)
    before = water_filling_time({sv.index: sv.bandwidth for sv in servers})
    after = water_filling_time({sv.index: sv.bandwidth for sv in view})
    if after <= before * (1 + ALIKE_SLACK):
        return view
    if size is None or size <= SMALL_HIER_RING_MAX_BYTES or not _rings_can_take(servers):
        return list(servers)
    slack = ALIKE_WIDE_SLACK if size >= UNLIKE_DIRECT_MIN_BYTES else ALIKE_RINGS_SLACK
    cheaper = after < before * (1 + Fraction(unlike_excess(servers)))
    return view if cheaper and after <= before * (1 + slack) else list(servers)


def _alike_buys_nothing(servers: Sequence[ServerInfo], view: Sequence[ServerInfo]) -> bool:
    """Whether seeing the degraded servers alike (``view``) leaves every one of them owning
    nothing, they outnumber the healthy servers, and the hierarchical ring can run with
    each decoupled as they are at a cost of at most :data:`UNLIKE_RING_MAX_EXCESS`
    (:func:`unlike_excess`).

    Seen alike, degraded servers can own slivers of every piece, which is what the view
    is for; where none of them owns anything it only takes rails away. One server down to
    2 of 8 NICs sets the water-filling (``β ≤ β*``), so seeing the others alike with it
    costs the water-filling nothing, yet with more degraded servers than healthy ones
    the decoupled servers then share too few rails: 6 servers, four degraded, 2.02-2.20 ×
    the bound (128 MiB-1 GiB) seen alike, 1.01-1.16 each decoupled as they are (R2CC
    1.34-1.70); 7 servers, four degraded, 1.35-1.47 against 1.02-1.13; 5 servers, three
    degraded, 1.57-1.73 against 1.02-1.14. With as many healthy servers or more, seen
    alike was as fast or faster (8 servers, half the NICs lost on one and one NIC on
    another, 1 GiB: 1.030 seen alike, 1.105 decoupled as they are).
    """
    slow = _degraded(view)
    shares = balanced_shares({sv.index: sv.bandwidth for sv in view})
    if any(shares[sv.index] > 0 for sv in slow) or 2 * len(slow) <= len(view):
        return False
    return hier_ring_blocker(servers) is None and unlike_excess(servers) <= UNLIKE_RING_MAX_EXCESS


def _rings_can_take(servers: Sequence[ServerInfo]) -> bool:
    """:data:`UNLIKE_RINGS_MIN_HEALTHY` healthy servers or more, no fewer than the degraded
    ones, and the hierarchical ring can run
    (:func:`~resilientcc.schedules.hier_ring.hier_ring_blocker`).

    With more degraded servers than healthy ones, seen alike they got the pipelined
    schedule at up to twice the direct schedule's time (7 servers, four degraded, 128 /
    384 MiB: 1964.5 / 5518.9 µs against 1305.0 / 2967.1)."""
    healthy = sum(1 for sv in servers if sv.healthy)
    return (
        healthy >= max(UNLIKE_RINGS_MIN_HEALTHY, len(servers) - healthy)
        and hier_ring_blocker(servers) is None
    )


def unlike_rings(servers: Sequence[ServerInfo], size: Fraction | None) -> bool:
    """Whether degraded servers that differ get the hierarchical ring, each decoupled,
    for a buffer of ``size`` bytes where that costs more than
    :data:`UNLIKE_RING_MAX_EXCESS`: below :data:`UNLIKE_DIRECT_MIN_BYTES`, with
    :data:`UNLIKE_RINGS_MIN_HEALTHY` healthy servers or more, where the ring can run
    (:func:`~resilientcc.schedules.hier_ring.hier_ring_blocker`) and its busiest NIC is
    at most :data:`UNLIKE_RINGS_MAX_EXCESS` above the water-filling
    (:func:`unlike_excess`). :func:`alike_view` has seen them alike first where that
    costs less than decoupling and at most :data:`ALIKE_RINGS_SLACK`.

    The direct schedule does not pipeline well below 1 GiB: on 6 to 12 servers with two
    to four degraded servers that differ (17 random patterns, 256 and 512 MiB) it was the
    slowest of the three every time, 1.43-2.38 × the bound where the better of the
    other two took 1.18-1.53 ×, and the lower estimate picked the faster of them but
    once (1.564 against 1.532). The ring's lead shrinks with the size and its excess:
    8 servers, four degraded, decoupling them 20.7 % over: 256 / 384 / 512 MiB 2342 /
    3192 / 4151 µs direct, 2222 / 3321 / 4386 ring; 7 servers, three degraded, 12.6 %:
    2201 / 2910 / 3685 against 1905 / 2848 / 3735; 8 servers, 25.1 % (one of four
    degraded with half its NICs lost; two patterns): the ring 3-6 % slower at 256 MiB,
    13-14 % at 384.
    At 1 GiB the direct schedule beat both in seven of eight patterns on 8 servers
    (1.30-1.44 ×). With two healthy servers seeing them alike could cost far more (6
    servers, 4 degraded, 256 MiB: 2.9-8.3 × where the direct schedule took 1.4-2.4 ×).

    >>> from resilientcc.topology import apply_fail_specs, hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> sv = server_view(apply_fail_specs(hierarchical(8, 8), ["0:nic0", "1:nic3", "2:nic5"]))
    >>> unlike_rings(sv, Fraction(2**28)), unlike_rings(sv, Fraction(2**29))
    (True, False)
    """
    return (
        size is not None
        and size < UNLIKE_DIRECT_MIN_BYTES
        and _rings_can_take(servers)
        and unlike_excess(servers) <= UNLIKE_RINGS_MAX_EXCESS
    )


def lone_healthy_view(servers: Sequence[ServerInfo], rail_fabric: bool) -> list[ServerInfo]:
    """One healthy server among degraded servers alike, seen with only their alive rails.

    On a rail-only fabric its NICs on the rails dead on every other server reach no one,
    and the water-filling would still count them: 4 × 8 GPUs, half the NICs lost on
    three servers, it gave the healthy one 7/10 of every piece, 1.6 × the bound on its
    alive rails (OptCC 1.675 × the bound, NCCL's ring 1.295). Seen with only those rails
    (at its own NICs' bandwidth, and no longer healthy) it is one more server alike, and
    the cluster is a healthy one on the alive rails. Elsewhere ``servers`` unchanged.

    >>> from resilientcc.topology import apply_fail_specs, hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> t = apply_fail_specs(hierarchical(4, 8), ["0:4", "1:4", "2:4"])
    >>> view = lone_healthy_view(server_view(t), rail_fabric=True)
    >>> view[3].alive, view[3].healthy
    ((4, 5, 6, 7), False)
    >>> lone_healthy_view(server_view(t), rail_fabric=False)[3].healthy
    True
    """
    healthy = [sv for sv in servers if sv.healthy]
    slow = _degraded(servers)
    if not rail_fabric or len(healthy) != 1 or not slow or len({sv.alive for sv in slow}) != 1:
        return list(servers)
    h, common = healthy[0], slow[0].alive
    if not h.nic_bw or not common or len(common) == h.nics:
        return list(servers)
    seen = replace(restricted(h, common, min(h.nic_bw[c] for c in common)), healthy=False)
    return [seen if sv.index == h.index else sv for sv in servers]


def decoupled_excess(servers: Sequence[ServerInfo]) -> Fraction:
    """How far the busiest server's network time with every degraded server decoupled
    exceeds the bound's water-filling (:func:`water_filling_time`), as a fraction.

    Decoupled, a degraded server moves ``M`` each way and a healthy one
    ``(2(N_h − 1) + D)/N_h · M`` (its rings among the ``N_h`` healthy servers, and the
    ``D`` degraded servers' partials in and results out of its shards); that is the
    water-filling exactly where the degraded servers own nothing.

    >>> from resilientcc.topology import fail_nics, hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> two = fail_nics(fail_nics(hierarchical(16, 8), 0, 1), 1, 1)
    >>> decoupled_excess(server_view(two))
    Fraction(1, 20)
    >>> decoupled_excess(server_view(fail_nics(fail_nics(hierarchical(8, 8), 0, 4), 1, 4)))
    Fraction(0, 1)
    """
    healthy = [sv for sv in servers if sv.healthy]
    slow = [sv for sv in servers if not sv.healthy]
    if len(healthy) < 2 or not slow or any(sv.bandwidth <= 0 for sv in servers):
        return Fraction(0)
    n_h = len(healthy)
    busy = max(
        *(Fraction(2 * (n_h - 1) + len(slow), n_h) / sv.bandwidth for sv in healthy),
        *(1 / sv.bandwidth for sv in slow),
    )
    return busy / water_filling_time({sv.index: sv.bandwidth for sv in servers}) - 1


def unlike_excess(servers: Sequence[ServerInfo]) -> float:
    """How far the busiest NIC's time of the hierarchical ring with degraded servers that
    differ, each decoupled (:func:`~resilientcc.schedules.hier_ring.unlike_sizes`),
    exceeds the bound's water-filling (:func:`water_filling_time`), as a fraction.

    >>> from resilientcc.topology import apply_fail_specs, hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> round(unlike_excess(server_view(apply_fail_specs(hierarchical(8, 8), ["0:2", "1:x1/2"]))), 4)
    0.0001
    """
    _, busy = unlike_sizes(servers)
    return busy / float(water_filling_time({sv.index: sv.bandwidth for sv in servers})) - 1


def _degraded(servers: Sequence[ServerInfo]) -> list[ServerInfo]:
    """The degraded servers (dead or slowed NICs), in order."""
    return [sv for sv in servers if not sv.healthy]


def hier_ring_rule(
    servers: Sequence[ServerInfo], shares: Mapping[int, Fraction], size: Fraction
) -> str | None:
    """The rule by which OptCC runs the hierarchical ring on ``servers`` for ``size``
    bytes when no variant is asked for, in words; ``None`` where it does not.

    Examples:
        >>> from resilientcc.topology import hierarchical, fail_nics
        >>> from resilientcc.schedules._build import server_view
        >>> sv = server_view(fail_nics(hierarchical(8, 8), 0, 4))
        >>> hier_ring_rule(sv, balanced_shares({s.index: s.bandwidth for s in sv}), Fraction(2**30))
        'one degraded server that owns no shard (decoupled): its partials out, its results in'
        >>> sv = server_view(fail_nics(hierarchical(4, 8), 0, 1))
        >>> hier_ring_rule(sv, balanced_shares({s.index: s.bandwidth for s in sv}), Fraction(2**30)) is None
        True
    """
    if small_hier_ring(servers, size):
        if size <= SMALL_HIER_RING_MAX_BYTES:
            return f"a small buffer (up to {format_size(SMALL_HIER_RING_MAX_BYTES)}): latency-bound"
        return (
            f"no degraded server on more than {PIPELINE_MAX_SERVERS} servers, up to "
            f"{format_size(HEALTHY_HIER_RING_MAX_BYTES)}"
        )
    # the default: above eight servers, or wherever the straggler owns nothing (1 GiB,
    # half the NICs lost, 4 / 8 servers: 5.497 / 5.569 ms against the pipelined 5.685 /
    # 5.815; with 2 lost on 8 servers, where it owns a share, 5.839 against 5.394, 5.401
    # with the ring's later spacing and depth; 1 lost: 5.403 against 5.189)
    degraded = _degraded(servers)
    if not degraded_alike(servers):
        # degraded servers that differ (alike_view gave up): each decoupled, on the
        # rails' parts of unlike_sizes (crossed from three healthy servers on), or the
        # direct schedule. 1 GiB, × the bound, ring / direct (unlike_excess): 8 servers,
        # 2 NICs lost on one and all at half speed on another 1.125 / 1.302 (0.01 %; 2.2 %
        # without crossed parts, the ring 1.133), 4 lost beside half speed 1.038 / 1.294
        # (0.03 %; 4.4 %, 1.137), 6 lost 1.019 / 1.105 (0); 4 / 6 / 12 servers, 1 or 2 lost
        # beside half speed 1.059 / 1.263 (3.3 %, not crossed: two healthy servers), 1.160
        # / 1.286 (0.03 %), 1.112 / 1.398 (0.08 %); 4 / 5 servers, 4 lost beside half speed
        # 1.115 / 1.323 and 1.044 / 1.617 (0; 14.3 % and 9.2 % without crossed parts); 8
        # servers, three degraded: 4 + 2 lost beside half speed 1.242 / 1.358 (6.1 %), 2
        # lost + NIC 7 lost beside half speed 1.361 / 1.299 (10.1 %), 1 + 2 lost 1.308 /
        # 1.312 (10.1 %)
        if hier_ring_blocker(servers) is not None:
            return None
        if unlike_excess(servers) <= UNLIKE_RING_MAX_EXCESS:
            return "degraded servers that differ, each decoupled, at little cost to the bound"
        if unlike_rings(servers, size):
            return "degraded servers that differ, each decoupled (unlike_rings)"
        return None
    owns_nothing = any(shares[sv.index] == 0 for sv in degraded)
    # from six servers on, a straggler that owns a share gets it as the hierarchical
    # ring's sliver (hier_ring.default_sliver). 1 GiB, 1 / 2 NICs lost: 6 servers 5.022
    # / 5.106 ms against the pipelined 4.987 / 5.092, 7 servers 4.910 against 5.084, 8
    # servers 4.988 / 5.145 against 5.189 / 5.394. Its NICs all at 7/8: 6 servers 5.064
    # against 4.893, 7 servers 4.977 against 5.004, 8 servers 5.012 against 5.154 (256
    # MiB: 1.381 against 1.486), 16 servers 5.350 against the weighted ring's 5.384
    # (without the sliver the hierarchical ring took 5.478 there). With the sliver's
    # results lagged (hier_ring.default_sliver_lag) 6 servers, 1 / 2 lost: 4.890 / 4.867
    # ms against 4.919 / 5.092 (256 MiB: 1.306 / 1.307 against 1.387 / 1.423), NICs at
    # 7/8 4.864 against 4.893; 5 servers still not: 5.346 / 4.973 against 4.711 / 4.902
    # (all with a lag of 4 pieces). With one NIC of 8 lost the pipelined schedule's
    # relay with results after partials (hier_pipeline.default_own_lag) beat it on 6:
    # 64 / 128 / 256 / 512 MiB / 1 GiB 1.434 / 1.243 / 1.112 / 1.070 / 1.051 x the bound
    # against 1.671 / 1.245 / 1.143 / 1.093 / 1.070 (2 lost: 1.062 against 1.043, 1 GiB)
    # several degraded servers alike on the ring, each decoupled (1 GiB, × the bound,
    # pipelined / ring): owning nothing (half the NICs lost on each of two), 4 servers
    # 1.063 / 1.170, 6 servers 1.137 / 1.067, 8 servers 1.127 / 1.030, 16 servers 1.202 /
    # 1.082; owning a share, each its sliver, 1 / 2 NICs lost on each of two: 4 servers
    # 1.087 / 1.451 and 1.080 / 1.271, 6 servers 1.082 / 1.148 and 1.104 / 1.123, 7
    # servers 1.081 / 1.073 and 1.114 / 1.040, 8 servers 1.095 / 1.027 and 1.120 / 1.037,
    # 12 servers 1.150 / 1.051 (1 lost), 16 servers 1.166 / 1.049 and 1.303 / 1.051; 2
    # lost on each of three of 8 servers 1.123 / 1.051. Without slivers (decoupled_excess
    # in brackets): 8 servers 1.267 (+10.7 %) and 1.185 (+7.1 %), 10 servers, 1 lost 1.215
    # (+8.3 %), 12 servers 1.179 (+6.8 %, 1 lost) and 1.148 (+4.5 %, 2 lost), 16 servers
    # 1.140 (+5 %) and 1.124 (+3.3 %); three of 8 servers with 4 lost, where no sliver
    # sizes balance the NICs, 1.142 / 1.182 (+2.1 %)
    n = len(servers)
    rule = None
    if len(degraded) > 1:
        if owns_nothing:
            if n >= SLIVER_MIN_SERVERS:
                rule = f"several degraded servers alike that own nothing, from {SLIVER_MIN_SERVERS} servers"
        elif default_sliver(servers) > 0:
            if n >= SEVERAL_SLIVER_MIN_SERVERS:
                rule = f"several degraded servers alike, each with its sliver, from {SEVERAL_SLIVER_MIN_SERVERS} servers"
        elif n >= SEVERAL_RING_ANY_SERVERS or (
            n >= SEVERAL_RING_MIN_SERVERS and decoupled_excess(servers) <= SEVERAL_RING_MAX_EXCESS
        ):
            rule = "several degraded servers alike, decoupled at little cost to the bound"
        if n >= SEVERAL_HIER_RING_MIN_SERVERS and several_hier_ring(servers, size):
            rule = (
                f"several degraded servers, up to {format_size(SEVERAL_HIER_RING_MAX_BYTES)} "
                f"from {SEVERAL_HIER_RING_MIN_SERVERS} servers"
            )
        if rule is None:
            return None
    few = n < SLIVER_MIN_SERVERS or (
        n <= ONE_DEAD_PIPELINE_MAX_SERVERS
        and len(degraded) == 1
        and degraded[0].nics == 8
        and len(degraded[0].alive) == 7
    )
    if (few and not owns_nothing) or hier_ring_blocker(servers) is not None:
        return None
    # with no degraded server OptCC stays NCCL's ring above eight servers (16 x 8 GPUs,
    # 1 GiB: the hierarchical ring 5.327 ms, 5.300 with its rings both ways and 96
    # pieces, 1 % for 3.1 million transfers; the ring 5.353), except where the
    # hierarchical ring crosses the network directly (healthy_network; 5.137)
    if not degraded:
        if healthy_network(servers, size) is not None:
            return "no degraded server: the direct network pass (healthy_network)"
        if healthy_rings(servers):
            return f"no degraded server on {n} servers of 8 GPUs or more (healthy_rings)"
        return None
    if rule is not None:
        return rule
    if owns_nothing:
        return (
            "one degraded server that owns no shard (decoupled): its partials out, its results in"
        )
    return f"one degraded server owning a share, from {SLIVER_MIN_SERVERS} servers: its sliver"


def _slowed(servers: Sequence[ServerInfo]) -> bool:
    """Whether a degraded server uses NICs slower than the cluster's fastest."""
    top = max((sv.nic_bw[c] for sv in servers if sv.nic_bw for c in sv.alive), default=0)
    return any(sv.nic_bw and any(sv.nic_bw[c] < top for c in sv.alive) for sv in _degraded(servers))


def ordered_rings_wins(
    topology: Topology, view: Sequence[ServerInfo], size: Fraction, layered: bool
) -> bool:
    """Whether Balance's rings in the best server order
    (:mod:`~resilientcc.schedules.ordered_rings`) should replace OptCC's schedule.

    Only where several servers are degraded, they differ (or :func:`alike_view` saw them
    alike at a cost), on a rail fabric, from :data:`ORDERED_RINGS_MIN_BYTES` on. The
    rings' estimate (:func:`~resilientcc.schedules.ordered_rings.rings_estimate`, over the
    water-filling of the servers as they are) is set against what OptCC would run,
    ``layered`` (the pipelined or hierarchical schedules on ``view``) or the direct
    schedule:

    * layered: where ``view`` costs the water-filling a factor ``c > 1``, the rings where
      their estimate is below ``ORDERED_RINGS_VIEW_FACTOR · c``
      (:data:`ORDERED_RINGS_SLOWED_VIEW_FACTOR` below :data:`UNLIKE_DIRECT_MIN_BYTES`
      where a degraded server runs on slowed NICs);
    * direct: from :data:`ORDERED_RINGS_MIN_SERVERS` servers on (below
      :data:`ORDERED_RINGS_FEW_SMALL_BYTES` from :data:`ORDERED_RINGS_SMALL_MIN_SERVERS`,
      there where the estimate is at most :data:`ORDERED_RINGS_FOUR_SMALL_ESTIMATE`). Up to
      :data:`~resilientcc.schedules.direct.DEEP_MAX_SERVERS` servers where the estimate
      is at most :data:`ORDERED_RINGS_FEW_ESTIMATE` (below
      :data:`ORDERED_RINGS_FEW_SMALL_BYTES`, :data:`ORDERED_RINGS_FEW_SMALL_ESTIMATE`);
      above, where the rings' bytes' time is at most
      :data:`ORDERED_RINGS_MAX_BYTES_ESTIMATE`. From
      :data:`ORDERED_RINGS_WIDE_MIN_BYTES` on, on any number of servers, only where
      the estimate is at most :data:`ORDERED_RINGS_WIDE_ESTIMATE`.

    Examples:
        >>> from resilientcc.topology import apply_fail_specs, hierarchical
        >>> t = apply_fail_specs(hierarchical(6, 8), ["0:nic0", "1:nic3", "2:nic7", "3:x7/8"])
        >>> ordered_rings_wins(t, optcc_view(t, Fraction(2**28)), Fraction(2**28), False)
        True
        >>> ordered_rings_wins(t, optcc_view(t, Fraction(2**20)), Fraction(2**20), False)
        False
    """
    if size < ORDERED_RINGS_MIN_BYTES or topology.param("fabric", "rail") != "rail":
        return False
    raw = usable_view(server_view(topology))
    if len(_degraded(raw)) < 2 or any(sv.bandwidth <= 0 or not sv.alive for sv in raw):
        return False
    wf_raw = water_filling_time({sv.index: sv.bandwidth for sv in raw})
    bound = wf_raw * size
    if layered:
        cost = float(water_filling_time({sv.index: sv.bandwidth for sv in view}) / wf_raw)
        if cost <= 1:
            return False
        slowed = size < UNLIKE_DIRECT_MIN_BYTES and _slowed(raw)
        factor = ORDERED_RINGS_SLOWED_VIEW_FACTOR if slowed else ORDERED_RINGS_VIEW_FACTOR
        return rings_estimate(topology, size, bound) < factor * cost
    n = len(raw)
    small = size < ORDERED_RINGS_FEW_SMALL_BYTES
    if n < (ORDERED_RINGS_SMALL_MIN_SERVERS if small else ORDERED_RINGS_MIN_SERVERS):
        return False
    order = best_server_order(topology)
    est = rings_estimate(topology, size, bound, order=order)
    if n < ORDERED_RINGS_MIN_SERVERS:
        return est <= ORDERED_RINGS_FOUR_SMALL_ESTIMATE
    if n <= DEEP_MAX_SERVERS:
        if size >= ORDERED_RINGS_WIDE_MIN_BYTES:
            return est <= ORDERED_RINGS_WIDE_ESTIMATE
        few_small = small and est <= ORDERED_RINGS_FEW_SMALL_ESTIMATE
        return est <= ORDERED_RINGS_FEW_ESTIMATE or few_small
    bytes_est = rings_estimate(topology, size, bound, latency=False, order=order)
    if bytes_est > ORDERED_RINGS_MAX_BYTES_ESTIMATE:
        return False
    return size < ORDERED_RINGS_WIDE_MIN_BYTES or est <= ORDERED_RINGS_WIDE_ESTIMATE


def _ordered_rings(topology: Topology, size: Fraction, check: bool) -> Schedule:
    """OptCC as Balance's rings in the best server order (its ``ordered_rings`` variant)."""
    servers = topology.servers
    if len(servers) < 2 or any(not topology.nics_of_server.get(s) for s in servers):
        raise ScheduleError("optcc: ordered_rings needs two servers or more, each with a NIC")
    order = best_server_order(topology)
    if order_throughput(topology, order) <= 0:
        raise ScheduleError(
            "optcc: ordered_rings needs every server to reach the next one on some rail"
        )
    base = ordered_rings_schedule(topology, size, check=check, order=order)
    return replace(
        base,
        name="optcc",
        meta=(("generator", "optcc"), *base.meta, ("variant", "ordered rings")),
    )


def _direct_plan(
    servers: Sequence[ServerInfo],
    shares: Mapping[int, Fraction],
    rail_lp: bool | None,
    decouple: bool,
) -> DirectPlan:
    """The direct schedule's plan: the default one, or the rail program's
    (:func:`~resilientcc.schedules.rail_split.rail_split`) where ``rail_lp`` asks for it
    or, by default, where the default plan's busiest NIC is more than
    :data:`RAIL_LP_MIN_GAIN` above the program's."""
    plan = DirectPlan(servers, shares)
    if rail_lp is False:
        return plan
    old = plan_nic_time(servers, plan, decouple)
    if not rail_lp:
        # no plan's busiest NIC is below the water-filling of the servers' bandwidths
        # (each server's bytes spread over its NICs at best), so where the default plan
        # is within the gain of it the program need not be solved
        floor = float(water_filling_time({sv.index: sv.bandwidth for sv in servers}))
        if old <= floor * (1 + RAIL_LP_MIN_GAIN) * (1 - 1e-9):
            return plan
    split = rail_split(servers, shares, decouple=decouple)
    if split is None and rail_lp:
        raise ScheduleError(
            "optcc: rail_lp needs per-NIC bandwidths (not a switch model) and a rail"
            " alive on both ends of every pair of servers"
        )
    if split is not None and (rail_lp or old > split.nic_time * (1 + RAIL_LP_MIN_GAIN)):
        return split.plan(servers)
    return plan


def _share_meta(
    servers: Sequence[ServerInfo], shares: Mapping[int, Fraction]
) -> tuple[tuple[str, str], ...]:
    """Meta entries ``shares`` (every server's) and ``share_straggler`` (the slowest's)."""
    worst = min(servers, key=lambda sv: sv.bandwidth)
    return (
        ("shares", ",".join(f"{s}:{shares[s]}" for s in sorted(shares))),
        ("share_straggler", str(shares[worst.index])),
    )


def _layered(
    topology: Topology,
    servers: Sequence[ServerInfo],
    shares: Mapping[int, Fraction],
    size: Fraction,
    pieces: int | None,
    check: bool,
    net_window: int | None,
    *,
    rings: bool,
    pipeline_timing: float | None = None,
    sliver: Fraction | None = None,
    relay: Fraction | None = None,
    flat_tail: int | None = None,
    network: str | None = None,
    nvlink_rs: str | None = None,
    nvlink_merge: int | None = None,
    own_lag: int | None = None,
    nvlink_channels: int | None = None,
    two_way_first: int | None = None,
    two_way_last: int | None = None,
    straggler_two_way: bool | None = None,
    relay_sum: bool | None = None,
    degraded_last: bool | None = None,
    sliver_gate: int | None = None,
    direct_first: int | None = None,
) -> Schedule:
    """OptCC's pipelined hierarchical variant, or with ``rings`` its hierarchical ring.

    (:mod:`~resilientcc.schedules.hier_pipeline`, :mod:`~resilientcc.schedules.hier_ring`.)
    """
    # default depth and order: the ring's; without failures the healthy pipeline's;
    # around a degraded server pipeline_depth (with the relay's, if any)
    scaled = rings and len(servers) >= SCALED_MIN_SERVERS
    healthy_cluster = not rings and all(sv.healthy for sv in servers)
    if rings:
        relay = Fraction(0)  # the hierarchical ring has none
        k, timing = default_ring_pieces(size, len(servers)), 0.0
        halving_size = scaled and len(servers) >= HALVING_MIN_SERVERS
        if scaled:
            k = HALVING_PIECES if halving_size else SCALED_PIECES
        elif size <= SMALL_HIER_RING_MAX_BYTES:
            k = SMALL_PIECES
        if network is None:
            small = None if halving_size else small_network(servers, size)
            small = small or healthy_network(servers, size)
            network = HALVING if halving_size else (small or RING)
        if sliver is None and network == DIRECT and size <= NO_SLIVER_MAX_BYTES:
            sliver = Fraction(0)
        if nvlink_rs is None:
            nvlink_rs = default_nvlink_rs(size)
        if nvlink_merge is None:
            nvlink_merge = len(servers) if scaled else 1
        if flat_tail is None and scaled:
            flat_tail = 0
    elif healthy_cluster:
        relay = Fraction(0) if relay is None else relay  # asked for: hier_pipeline refuses
        k, timing = default_healthy_pieces(size, len(servers), len(servers[0].ranks)), 0.0
    else:
        relay = pipeline_relay(servers, size) if relay is None else relay
        k, timing = pipeline_depth(size, len(servers), relay)
    if pieces is not None:
        k = pieces
    lanes = nvlink_channels
    if lanes is None:
        lanes = default_healthy_lanes(size, k, len(servers[0].ranks)) if healthy_cluster else 1
    if pipeline_timing is None:
        pipeline_timing = timing
    if net_window is not None:
        w = net_window
    elif rings or len(servers) <= PIPELINE_MAX_SERVERS:
        w = default_net_window(len(servers), size, k)
    else:  # not tuned there: 16 servers, 1 NIC lost, 32 pieces, W = 9: 8.040 ms, 6.426 without
        w = 0
    # merged NVLink runs: race tracking by intervals of chunks (the same schedule, built
    # faster: 128 x 8 GPUs, 4 NICs lost, 1 GiB, 37.6 -> 9.3 s)
    b = Builder("optcc", topology.num_ranks, runs=rings and (nvlink_merge or 1) > 1)
    all_flat = False
    if rings:
        thin = default_sliver(servers) if sliver is None else Fraction(sliver)
        lag = (default_sliver_lag(k) if own_lag is None else own_lag) if thin else None
        if lag is not None and sliver_gate is None:
            sliver_gate = default_sliver_gate(w, lag)
        net = network or RING  # (resolved above; the name narrows the type)
        halving = net in (HALVING, DIRECT)  # passes that are not rings
        if default_bidirectional(servers, halving):
            # the rings run both ways: no piece has anything to add (recorded as 0)
            two_way_first = two_way_last = 0
        if two_way_first is None:
            two_way_first = default_two_way_first(thin, halving)
        if two_way_last is None:
            two_way_last = default_two_way_last(thin, halving)
        if direct_first is None:
            direct_first = default_direct_first(servers, k, net)
        if straggler_two_way is None:
            straggler_two_way = default_straggler_two_way(thin, size)
        # the flat tail as hier_ring takes it (the meta records flat_tail only if asked);
        # with the direct network pass the degraded servers' NVLink all-gathers are flat
        # there too, and where that is every piece straggler_two_way has no effect
        flat_last = default_flat_tail(size, k) if flat_tail is None else flat_tail
        all_flat = net == DIRECT and flat_last >= k
        classes = hier_ring_schedule(
            b,
            servers,
            k,
            size,
            net_window=w,
            sliver=thin,
            network=net,
            merge=nvlink_merge or 1,
            flat_last=flat_last,
            sliver_lag=lag,
            two_way_first=two_way_first,
            two_way_last=two_way_last,
            straggler_two_way=straggler_two_way,
            sliver_gate=sliver_gate,
            nvlink_rs=nvlink_rs or RING,
            direct_first=direct_first,
        )
        healthy = sum(1 for sv in servers if sv.healthy)
        slow = len(servers) - healthy
        shares = {sv.index: (1 - slow * thin) / healthy if sv.healthy else thin for sv in servers}
    else:
        if flat_tail is None:
            flat_tail = default_pipeline_flat_tail(servers, size, k)
        lag = default_own_lag(servers, relay, k, size) if own_lag is None else own_lag
        summed = default_relay_sum(servers, relay)
        relay_sum = summed if relay_sum is None else relay_sum
        degraded_last = summed if degraded_last is None else degraded_last
        classes = hier_pipeline(
            b,
            servers,
            shares,
            k,
            net_window=w,
            timing=pipeline_timing,
            size=size,
            relay=relay,
            flat_last=flat_tail,
            own_lag=lag,
            nvlink_channels=lanes,
            relay_sum=bool(relay_sum),
            degraded_last=bool(degraded_last),
        )
    meta = (
        ("generator", "optcc"),
        ("pieces", str(k)),
        ("net_window", str(w)),
        *_share_meta(servers, shares),
        # rail/rail_d:size, "x" after rail_d marking a crossed class (hier_ring.unlike_classes)
        ("classes", ",".join(f"{c.rail}/{c.rail_d}{'x' * c.crossed}:{c.size}" for c in classes)),
        ("ring_fraction", "0"),
        *((("relay", str(relay)),) if relay > 0 else ()),
        *((("relay_sum", "1"),) if not rings and relay > 0 and relay_sum else ()),
        *((("degraded_last", "1"),) if not rings and degraded_last else ()),
        *((("flat_tail", str(flat_tail)),) if flat_tail else ()),
        *((("own_lag", str(lag)),) if lag is not None else ()),
        *((("sliver_gate", str(sliver_gate)),) if rings and thin and sliver_gate else ()),
        *((("nvlink_channels", str(lanes)),) if not rings and lanes > 1 else ()),
        *((("two_way_first", str(two_way_first)),) if rings and two_way_first else ()),
        *((("direct_first", str(direct_first)),) if rings and direct_first else ()),
        *((("two_way_last", str(two_way_last)),) if rings and two_way_last else ()),
        *(
            (("straggler_two_way", "0" if straggler_two_way is False else "1"),)
            if rings and any(not sv.healthy for sv in servers) and not all_flat
            else ()
        ),
        *((("network", network), ("nvlink_merge", str(nvlink_merge))) if rings else ()),
        *((("nvlink_rs", nvlink_rs),) if rings and nvlink_rs == HALVING else ()),
        ("variant", "hierarchical ring" if rings else "pipelined hierarchical"),
    )
    return b.build(size, topology=topology.shape_fingerprint, meta=meta, check=check)


def _split_blocker(servers: Sequence[ServerInfo]) -> str | None:
    """Why the rings-plus-tail split cannot run on ``servers`` (``None`` if it can)."""
    if sum(1 for sv in servers if sv.healthy) < 2:
        return "at least two healthy servers"
    if not common_rails(servers):
        return "a NIC alive on every server"
    return None


#: OptCC runs flat rings over every GPU (the weighted ring, the split's rings) on servers
#: with fewer NICs than GPUs only where their latency is at most this many times their
#: bandwidth time (:func:`ring_latency_ratio`, :func:`rings_pay`); below, the direct
#: schedule's two network hops are faster
RINGS_MAX_LATENCY_RATIO = 1.0
#: the same on servers with a NIC per GPU, where the direct schedule's NVLink trees cost more
RINGS_ONE_NIC_MAX_LATENCY_RATIO = 2.5
#: above this many servers the rings run at any size (measured up to 20; the direct
#: schedule's transfers grow as the square of the servers)
RINGS_DIRECT_MAX_SERVERS = 20


def ring_latency_ratio(servers: Sequence[ServerInfo], size: Fraction) -> float:
    """A flat ring's latency over its bandwidth time, estimated: ``2(p − 1)`` steps, ``N``
    of each pass's hops on the network and the rest on NVLink (``NET_LAT``, ``NVL_LAT``:
    NCCL's 14 and 3.4 µs), against ``2(p − 1)/p · M / B`` with ``B`` the fastest server's
    network bandwidth, for ``p`` GPUs on ``N`` servers.

    >>> from resilientcc.topology import fail_nics, hierarchical
    >>> view = server_view(fail_nics(hierarchical(8, 8, nics_per_server=4), 1, 1))
    >>> tuple(round(ring_latency_ratio(view, Fraction(2**k)), 2) for k in (20, 26, 30))
    (58.59, 0.92, 0.06)
    """
    p = sum(len(sv.ranks) for sv in servers)
    n = len(servers)
    bandwidth = float(max(sv.bandwidth for sv in servers))
    if p < 2 or bandwidth <= 0:
        return 0.0
    latency = 2 * (n * NET_LAT + (p - n) * NVL_LAT)
    return latency / (2 * (p - 1) / p * float(size) / bandwidth)


def _fewer_nics(servers: Sequence[ServerInfo]) -> bool:
    """Whether some server has fewer NICs than GPUs."""
    return any(sv.nics < len(sv.ranks) for sv in servers)


def rings_pay(servers: Sequence[ServerInfo], size: Fraction) -> bool:
    """Whether OptCC's flat rings (the weighted ring, the split's rings, NCCL's ring with
    no degraded server where no layered schedule runs) may run at ``size``: their :func:`ring_latency_ratio` at most :data:`RINGS_MAX_LATENCY_RATIO`
    on servers with fewer NICs than GPUs, else :data:`RINGS_ONE_NIC_MAX_LATENCY_RATIO`;
    at any size above :data:`RINGS_DIRECT_MAX_SERVERS` servers.

    They pay a latency at every one of their ``2(p − 1)`` steps, where the direct
    schedule crosses the network once each way. Measured with
    ``benchmarks/bench_flat_rings.py`` (the direct schedule's simulated time over the
    rings'; 4 to 20 servers of 4 or 8 GPUs with 1, 2, 4, 5 or 8 NICs, one mildly degraded
    server, 4 KiB to 1 GiB; 87 points fitted, 72 held out on other clusters and sizes):
    the weighted ring on servers with fewer NICs than GPUs, above the limit the direct
    schedule faster in 15 of 15 (medians 0.207 fitted, 0.390 held out), at or below it the
    ring in 20 of 22; the split with a NIC per GPU (where the rules reach it only with the
    layered variants refused), above 2.5 the direct schedule faster in 12 of 13 (the
    slower 1.122), at or below it the split in 13 of 13. With no degraded server (NCCL's
    ring) above 1 the direct schedule was faster in 29 of 29 (fitted and held out).

    >>> from resilientcc.topology import fail_nics, hierarchical
    >>> view = server_view(fail_nics(hierarchical(8, 8, nics_per_server=4), 1, 1))
    >>> tuple(rings_pay(view, Fraction(2**k)) for k in (20, 26, 30))
    (False, True, True)
    """
    if len(servers) > RINGS_DIRECT_MAX_SERVERS:
        return True
    limit = RINGS_MAX_LATENCY_RATIO if _fewer_nics(servers) else RINGS_ONE_NIC_MAX_LATENCY_RATIO
    return ring_latency_ratio(servers, size) <= limit


def _ring_fraction(
    servers: Sequence[ServerInfo], shares: Mapping[int, Fraction], asked: object, size: Fraction
) -> Fraction:
    """The ring part ``f`` of the split schedule (``optcc``'s ``ring_fraction``): by
    default :func:`split_fraction`, but none on servers with fewer NICs than GPUs (there
    the direct schedule alone moves the bound's network bytes, NVLink has room, and with
    its depth read from the time (:func:`pieces_bytes`) it measured faster in 46 of 51
    fitted and 36 of 45 held out, medians 0.806 and 0.854, from 4 KiB to 1 GiB;
    ``benchmarks/bench_flat_rings.py``) nor where the rings' latency does not pay
    (:func:`rings_pay`).
    """
    if asked is not None:
        try:
            f = Fraction(str(asked))
        except (ValueError, ZeroDivisionError):
            raise ScheduleError(f"optcc: ring_fraction must be a number, got {asked!r}") from None
        if not 0 <= f < 1:
            raise ScheduleError(f"optcc: ring_fraction must be in [0, 1), got {f}")
        blocker = _split_blocker(servers) if f > 0 else None
        if blocker is not None:
            raise ScheduleError(f"optcc: ring_fraction needs {blocker}")
        return f
    if _fewer_nics(servers) or not rings_pay(servers, size):
        return Fraction(0)
    return split_fraction(servers, shares)


#: the direct schedule's pipeline depths (:func:`~resilientcc.schedules.direct.default_pieces`)
#: were drawn on servers of 8 × 400 Gb/s: this many bytes/s (:func:`pieces_bytes`)
PIECES_REFERENCE_BW = Fraction(400 * 10**9)


def pieces_bytes(servers: Sequence[ServerInfo], size: Fraction) -> Fraction:
    """The size at which OptCC's fallback trees' thresholds read a size (and, until
    2026-11-28, the direct schedule's default depth; now :func:`depth_bytes`): ``size``
    times :data:`PIECES_REFERENCE_BW` over the fastest server's network bandwidth, where
    that is slower (never below ``size`` itself).

    The depths were drawn on servers of 8 × 400 Gb/s, where a byte's time sets both the
    fill the pieces hide and the latency they cost. On slower servers (fewer NICs than
    GPUs, every NIC slowed) the same bytes take longer and the pipeline pays for deeper
    pieces sooner. Measured on the random audit's clusters where OptCC runs the direct
    schedule and the depth moves (1 MiB to 256 MiB; the time with the scaled depth over
    the time without): seeds 0–149, 27 of 27 faster (0.700–0.998); held out, seeds
    150–399, 33 of 33 (0.765–0.998), and the large draw, seeds 1000–1059, 14 of 17
    (0.697–0.974; the slower 1.010, 1.011, 1.063: 8 → 12 pieces at 256 MiB on servers of
    one NIC).

    >>> from resilientcc.topology import hierarchical
    >>> float(pieces_bytes(server_view(hierarchical(4, 8, nics_per_server=2)), Fraction(2**20)))
    4194304.0
    >>> float(pieces_bytes(server_view(hierarchical(4, 8)), Fraction(2**20)))
    1048576.0
    """
    return read_at(size, max((sv.bandwidth for sv in servers), default=Fraction(0)))


def depth_bytes(servers: Sequence[ServerInfo], size: Fraction) -> Fraction:
    """The size at which OptCC reads the direct schedule's default depth: ``size`` read at
    the slowest server's pace (:func:`read_at`; at least :func:`pieces_bytes`, which
    reads it at the fastest server's and sets the fallback trees' thresholds).

    A slow server's sends and its results' returns cross its own NICs, so the pieces
    that overlap them are sized by its time, not the others'. Until 2026-11-28 the depth
    was read at the fastest server's pace: 5 × 6 GPUs of one NIC, server 4 at 1/8, 1 MiB
    (8 MiB read that way, one piece; 64 MiB at server 4's pace, six) took 2.40 × the
    bound against 1.56 × now. Measured on the random audit's clusters where OptCC runs
    the direct schedule and the depth moves (from 64 KiB, both draws; the time with the
    new depth over the old): seeds 0–399, 34 cases, geometric mean 0.925, 28 faster by
    more than 1 %, 3 slower (worst 1.038); held out, seeds 400–799, 34 cases, 0.919, 28
    faster, 3 slower (worst 1.071).

    >>> from resilientcc.topology import hierarchical, scale_server_nics
    >>> t = scale_server_nics(hierarchical(4, 8, nics_per_server=1), 3, Fraction(1, 8))
    >>> float(depth_bytes(server_view(t), Fraction(2**20))) / 2**20
    64.0
    """
    return read_at(size, min((sv.bandwidth for sv in servers), default=Fraction(0)))


def read_at(size: Fraction, bandwidth: Fraction) -> Fraction:
    """``size`` read at ``bandwidth``'s pace: the bytes :data:`PIECES_REFERENCE_BW` carries
    in the time ``bandwidth`` needs for ``size`` (``size`` itself where ``bandwidth`` is
    at least that fast, or 0).

    >>> read_at(Fraction(2**20), Fraction(50 * 10**9)) == 8 * 2**20
    True
    """
    if bandwidth <= 0 or bandwidth >= PIECES_REFERENCE_BW:
        return size
    return size * PIECES_REFERENCE_BW / bandwidth


def split_fraction(servers: Sequence[ServerInfo], shares: Mapping[int, Fraction]) -> Fraction:
    """The split schedule's ring part by bandwidth alone (OptCC's default where the rings'
    latency pays, :func:`_ring_fraction`): for one degraded server that owns a share
    (``β`` of a healthy server's bandwidth), ``β`` above :data:`DEEP_MAX_SERVERS`
    servers, else ``2β − 1``; 0 where the split cannot run or the straggler owns nothing.

    >>> from resilientcc.topology import fail_nics, hierarchical
    >>> view = optcc_view(fail_nics(hierarchical(8, 8, nics_per_server=4), 1, 1))
    >>> split_fraction(view, balanced_shares({sv.index: sv.bandwidth for sv in view}))
    Fraction(3, 4)
    """
    degraded = _degraded(servers)
    if len(degraded) != 1 or _split_blocker(servers) is not None:
        return Fraction(0)
    d = degraded[0]
    if shares[d.index] == 0:  # decoupled regime: no rings
        return Fraction(0)
    beta = d.bandwidth / max(sv.bandwidth for sv in servers)
    if len(servers) > DEEP_MAX_SERVERS:
        return beta
    # up to six servers: from the direct schedule alone at β = 1/2 to rings alone at β = 1
    return max(Fraction(0), 2 * beta - 1)


def _ring_split(
    b: Builder,
    servers: Sequence[ServerInfo],
    f: Fraction,
    size: Fraction,
    pieces: int | None,
    window: int,
    max_serial: int,
    ramp: bool,
) -> tuple[DirectPlan, int]:
    """Rings on ``f`` of the buffer, the decoupled direct schedule on the rest.

    The caller got ``f`` from :func:`_ring_fraction`, which checked :func:`_split_blocker`.
    """
    nics = max(sv.nics for sv in servers)
    common = common_rails(servers)
    healthy = [sv for sv in servers if sv.healthy]
    p = sum(len(sv.ranks) for sv in servers)
    nic_rings(b, servers, f, common, total_bytes=float(size))
    # the rings load each common rail with 2(p−1)/p · f/|common| per direction
    ring_load = Fraction(2 * (p - 1), p) * f / (len(common) * (1 - f))
    shares = {sv.index: Fraction(1, len(healthy)) if sv.healthy else Fraction(0) for sv in servers}
    plan = DirectPlan(servers, shares, base_load={c: ring_load for c in common})
    k = pieces if pieces is not None else min(12, 2 * default_pieces(size * (1 - f), len(servers)))
    direct_allreduce(
        b,
        servers,
        1 - f,
        k,
        plan,
        max_serial=max_serial,
        total_bytes=float(size),
        window=window,
        piece_weights=piece_weights(k, 4) if ramp else None,
        intra_channel=nics,
        rs_channel_offset=nics,
        ag_channel_offset=2 * nics,
        stage_degraded=False,
        balance=True,
        avoid_stage=False,
    )
    return plan, k


#: OptCC's variants (named by the option that asks for each, :class:`VariantChoice`), in
#: words, as :func:`~resilientcc.sim.tune.tune` and ``rcc`` name them
VARIANT_LABELS: Mapping[str, str] = MappingProxyType(
    {
        "ordered_rings": "ordered rings",
        "hier_ring": "hierarchical ring",
        "pipeline": "pipelined",
        "weighted_ring": "weighted ring",
        "ring": "NCCL's ring",
        "direct": "direct",
        "trees": "tree packing",
    }
)

#: OptCC's variants, by the option that asks for each (:class:`VariantChoice`)
VARIANTS = tuple(VARIANT_LABELS)

#: the ``optcc`` options that ask for each variant that can be asked for: NCCL's ring
#: runs only where the rules choose it, and the direct schedule is reached by refusing
#: every other variant (its split form, ``ring_fraction``, then as the rules set it; on
#: a cluster with no degraded server that leaves NCCL's ring, where ``direct=True``
#: would force the direct schedule)
VARIANT_OPTIONS: Mapping[str, Mapping[str, object]] = MappingProxyType(
    {
        "ordered_rings": MappingProxyType({"ordered_rings": True}),
        "hier_ring": MappingProxyType({"hier_ring": True}),
        "pipeline": MappingProxyType({"pipeline": True}),
        "weighted_ring": MappingProxyType({"weighted_ring": True}),
        "direct": MappingProxyType(
            {
                "ordered_rings": False,
                "hier_ring": False,
                "pipeline": False,
                "weighted_ring": False,
                "trees": False,
            }
        ),
        "trees": MappingProxyType({"trees": True}),
    }
)


@dataclass(frozen=True)
class VariantChoice:
    """Which of OptCC's variants runs, and the rule that chose it.

    Attributes:
        variant: one of :data:`VARIANTS`, named by the ``optcc`` option that asks for it
            (``"ring"``: NCCL's ring, where no server is degraded and no layered
            schedule runs; ``"direct"``: the direct schedule, with ``ring_fraction`` its
            split form).
        rule: why, in words (``"asked for"`` where an option named it).
        relief: the weighted ring's degraded server and its bandwidth fraction.
    """

    variant: str
    rule: str
    relief: tuple[int, Fraction] | None = None


def choose_variant(topology: Topology, size: object, **options: Any) -> VariantChoice:
    """The variant :func:`optcc` runs for ``topology`` and ``size`` with ``options``
    (its variant options: ``hier_ring``, ``pipeline``, ``weighted_ring``,
    ``ordered_rings``, ``ring_fraction``, ``direct``; others are ignored), and the rule
    that chose it, without generating the schedule.

    Examples:
        >>> from resilientcc.topology import apply_fail_specs, hierarchical
        >>> choose_variant(apply_fail_specs(hierarchical(4, 8), ["0:1"]), 2**30)
        VariantChoice(variant='pipeline', rule='one degraded server on up to 8 servers', relief=None)
        >>> choose_variant(hierarchical(24, 8), 2**30).variant
        'ring'
        >>> choose_variant(hierarchical(4, 8), 2**30, direct=True).rule
        'asked for'
    """
    m = generator_args("optcc", to_size(size), {})
    graph_rule = None if options.get("trees") is False else packs_trees(topology)
    if graph_rule is not None:
        return VariantChoice("trees", _ASKED if options.get("trees") else graph_rule)
    servers = optcc_view(topology, m)
    shares = balanced_shares({sv.index: sv.bandwidth for sv in servers})
    asked = {
        k: options.get(k)
        for k in ("hier_ring", "pipeline", "weighted_ring", "ordered_rings", "trees")
    }
    return _choice(
        topology,
        servers,
        shares,
        m,
        ring_fraction=options.get("ring_fraction"),
        direct=bool(options.get("direct", False)),
        **asked,
    )


#: the rule of a variant an option names
_ASKED = "asked for"

#: the rule that turns to the ordered rings (where several degraded servers differ)
_UNLIKE_RULE = "several degraded servers that differ: Balance's rings in the best order"

#: NCCL's ring where no server is degraded and no layered schedule runs, where its latency
#: pays (:func:`rings_pay`; there the direct schedule measures 1.12 x the ring, 4 x 8 GPUs,
#: 1 GiB), else the direct schedule
_HEALTHY_RING_RULE = "no degraded server, no layered schedule: NCCL's ring"
_HEALTHY_DIRECT_RULE = (
    "no degraded server, no layered schedule, where NCCL's flat ring's latency does not pay:"
    " the direct schedule"
)


def _choice(
    topology: Topology,
    servers: Sequence[ServerInfo],
    shares: Mapping[int, Fraction],
    size: Fraction,
    *,
    hier_ring: bool | None,
    pipeline: bool | None,
    weighted_ring: bool | None,
    ordered_rings: bool | None,
    ring_fraction: Fraction | None,
    direct: bool,
    trees: bool | None = None,
) -> VariantChoice:
    """:func:`choose_variant` on ``optcc``'s view of the servers and their shares: the
    variant an option asks for (:func:`_asked_choice`), else OptCC's rules among the
    variants not refused (:func:`_default_choice`)."""
    flags = {
        "ordered_rings": ordered_rings,
        "hier_ring": hier_ring,
        "pipeline": pipeline,
        "weighted_ring": weighted_ring,
        "trees": trees,
    }
    for name, value in flags.items():
        if value is not None and not isinstance(value, bool):
            raise ScheduleError(f"optcc: {name} must be true or false, got {value!r}")
    others = ring_fraction is not None or direct
    if others or any(flags.values()):
        if trees:
            if others or any(v for k, v in flags.items() if k != "trees"):
                raise ScheduleError(
                    "optcc: trees cannot be combined with another variant, ring_fraction or direct"
                )
            if topology.num_ranks > TREES_MAX_GPUS:
                raise ScheduleError(
                    f"optcc: trees runs on clusters of up to {TREES_MAX_GPUS} GPUs (here"
                    f" {topology.num_ranks}): beyond, its lanes thin out under the transfer"
                    " cap (8 × 8 GPUs, 256 MiB: 1.64 × the bound against the layered 1.42)"
                )
            return VariantChoice("trees", _ASKED)
        return _asked_choice(
            topology,
            servers,
            ordered_rings=bool(ordered_rings),
            hier_ring=bool(hier_ring),
            pipeline=bool(pipeline),
            weighted_ring=bool(weighted_ring),
            others=others,
            direct=direct,
        )
    refused = frozenset(name for name, value in flags.items() if value is False)
    return _default_choice(topology, servers, shares, size, refused)


def _asked_choice(
    topology: Topology,
    servers: Sequence[ServerInfo],
    *,
    ordered_rings: bool,
    hier_ring: bool,
    pipeline: bool,
    weighted_ring: bool,
    others: bool,
    direct: bool,
) -> VariantChoice:
    """The variant an option names, raising where it cannot run or is combined with
    another; ``others`` (``ring_fraction`` or ``direct`` given) with none named asks for
    the direct schedule (NCCL's ring where no server is degraded, unless ``direct``)."""
    if ordered_rings:
        if others or weighted_ring or pipeline or hier_ring:
            raise ScheduleError(
                "optcc: ordered_rings cannot be combined with pipeline, hier_ring,"
                " weighted_ring, ring_fraction or direct"
            )
        return VariantChoice("ordered_rings", _ASKED)
    if hier_ring:
        return _asked_layered(
            "hier_ring",
            others or weighted_ring or pipeline,
            "pipeline, ring_fraction, direct or weighted_ring",
            hier_ring_blocker(servers),
        )
    if pipeline:
        return _asked_layered(
            "pipeline",
            others or weighted_ring,
            "ring_fraction, direct or weighted_ring",
            pipeline_blocker(servers),
        )
    if weighted_ring:
        if others:
            raise ScheduleError(
                "optcc: weighted_ring cannot be combined with pipeline, ring_fraction or direct"
            )
        relief = _weighted_ring_relief(topology, servers)
        if relief is None:
            raise ScheduleError(
                "optcc: weighted_ring needs three servers or more, one of them degraded,"
                " with more than 3/4 of a healthy server's bandwidth"
            )
        return VariantChoice("weighted_ring", _ASKED, relief)
    if all(sv.healthy for sv in servers) and not direct:
        return VariantChoice("ring", _HEALTHY_RING_RULE)
    return VariantChoice("direct", _ASKED)


def _asked_layered(name: str, combined: bool, others: str, blocker: str | None) -> VariantChoice:
    """A layered variant asked for by its option ``name``: refused where it is
    ``combined`` with one of ``others`` or where ``blocker`` says what it needs."""
    if combined:
        raise ScheduleError(f"optcc: {name} cannot be combined with {others}")
    if blocker is not None:
        raise ScheduleError(f"optcc: {name} needs {blocker}")
    return VariantChoice(name, _ASKED)


def _default_choice(
    topology: Topology,
    servers: Sequence[ServerInfo],
    shares: Mapping[int, Fraction],
    size: Fraction,
    refused: frozenset[str],
) -> VariantChoice:
    """OptCC's rules, in the order they apply, among the variants not ``refused`` (the
    ``optcc`` options given as ``False``). The turns to the ordered rings, the
    hierarchical ring around several degraded servers and the tree packing where only
    the direct schedule or NCCL's ring is left, or on servers of one GPU, apply only
    where none is (the trees aside: ``trees=False`` keeps the other turns)."""
    # the rules' own turns (the ordered rings, the trees where nothing else is left)
    # apply where no variant but the trees is refused: trees=False is the rules without it
    free = not (refused - {"trees"})
    trees_free = free and "trees" not in refused
    ring_rule = None if "hier_ring" in refused else hier_ring_rule(servers, shares, size)
    pipe_rule = None if "pipeline" in refused else _pipeline_rule(servers)
    layered = ring_rule is not None or pipe_rule is not None
    tree_rule = None if "trees" in refused else trees_rule(topology, size)
    if tree_rule is not None:
        # the ordered rings keep their turn where their estimate gives it to them (4
        # servers, every NIC at 7/8, NIC 2 at half speed, NIC 5 at 3/4, 128 MiB: the
        # rings 1.476 × the bound, the trees 1.517, the direct schedule 1.581)
        if free and ordered_rings_wins(topology, servers, size, layered=layered):
            rest = "the layered schedule" if layered else "the direct schedule"
            return VariantChoice("ordered_rings", f"{_UNLIKE_RULE}, estimated faster than {rest}")
        return VariantChoice("trees", tree_rule)
    one_gpu = one_gpu_trees_rule(topology, servers, size) if trees_free else None
    if one_gpu is not None:
        return VariantChoice("trees", one_gpu)
    uneven = uneven_trees_rule(topology, size) if trees_free else None
    if uneven is not None:
        return VariantChoice("trees", uneven)
    two_gpus = two_gpus_rule(servers, size) if free else None
    if two_gpus is not None:
        return two_gpus
    if layered:
        if free and ordered_rings_wins(topology, servers, size, layered=True):
            return VariantChoice(
                "ordered_rings", f"{_UNLIKE_RULE}, estimated faster than the layered schedule"
            )
        if ring_rule is not None:
            return VariantChoice("hier_ring", ring_rule)
        assert pipe_rule is not None
        return VariantChoice("pipeline", pipe_rule)
    if (
        "weighted_ring" not in refused
        and len(servers) > PIPELINE_MAX_SERVERS
        and rings_pay(servers, size)
    ):
        relief = _weighted_ring_relief(topology, servers)
        if relief is not None:
            rule = (
                f"one degraded server above {PIPELINE_MAX_SERVERS} servers, with more than"
                " 3/4 of a healthy server's bandwidth, where a flat ring's latency is small"
                " beside its bandwidth time"
            )
            return VariantChoice("weighted_ring", rule, relief)
    fallback = fallback_trees_rule(topology, servers, size) if trees_free else None
    healthy = all(sv.healthy for sv in servers)
    if fallback is not None and (healthy or len(servers) == 1):
        return VariantChoice("trees", fallback)
    # what keeps the layered schedules out (None where they were refused or their rules
    # stop): the direct schedule replaces NCCL's ring with no degraded server only there
    blocker = pipeline_blocker(servers) or hier_ring_blocker(servers)
    if healthy and len(servers) > 1 and blocker and not rings_pay(servers, size):
        return VariantChoice("direct", _HEALTHY_DIRECT_RULE)
    if healthy:
        return VariantChoice("ring", _HEALTHY_RING_RULE)
    if len(servers) == 1:
        return VariantChoice("ring", "one server, no network: NCCL's ring over NVLink")
    if free and ordered_rings_wins(topology, servers, size, layered=False):
        return VariantChoice(
            "ordered_rings", f"{_UNLIKE_RULE}, estimated faster than the direct schedule"
        )
    if free and several_hier_ring(servers, size):
        return VariantChoice(
            "hier_ring",
            f"several degraded servers, up to {format_size(SEVERAL_HIER_RING_MAX_BYTES)}, "
            "where the direct schedule would run",
        )
    if fallback is not None:
        return VariantChoice("trees", fallback)
    why = f"the layered schedules need {blocker}" if blocker else "no other rule applies"
    return VariantChoice("direct", why)


def _pipeline_rule(servers: Sequence[ServerInfo]) -> str | None:
    """Why OptCC runs the pipelined schedule by default, in words; ``None`` where it does
    not: where :func:`pipeline_blocker` blocks it, and above
    :data:`PIPELINE_MAX_SERVERS` servers unless several degraded servers rule out the
    hierarchical and weighted rings and leave the direct schedule (16 × 8 GPUs, 1 NIC
    lost on each of two servers, 256 MiB: 1.361 × the bound against 2.211; Balance
    1.466). Where the straggler owns nothing (decoupled regime) the direct schedule was
    the default below six servers until the credit window (1 GiB, 4 of 8 NICs lost, 3 /
    4 / 5 servers: pipelined 5.643 / 5.685 / 5.694 ms against 6.334 / 5.887 / 6.112)."""
    if pipeline_blocker(servers) is not None:
        return None
    degraded = _degraded(servers)
    n = len(servers)
    if len(degraded) <= 1:
        if n > PIPELINE_MAX_SERVERS:
            return None
        return (
            f"{'one' if degraded else 'no'} degraded server on up to {PIPELINE_MAX_SERVERS} servers"
        )
    if n > PIPELINE_MAX_SERVERS:
        return "several degraded servers alike, where the rings do not run"
    return f"several degraded servers alike on up to {PIPELINE_MAX_SERVERS} servers"


def _weighted_ring_relief(
    topology: Topology, servers: Sequence[ServerInfo]
) -> tuple[int, Fraction] | None:
    """The straggler and its bandwidth fraction where the weighted ring can run (one
    degraded server, :func:`~resilientcc.schedules.weighted_ring.weighted_ring_applies`),
    else ``None``."""
    degraded = _degraded(servers)
    full = max(sv.bandwidth for sv in servers)
    if len(degraded) != 1 or full <= 0:
        return None
    beta = degraded[0].bandwidth / full
    return (degraded[0].index, beta) if weighted_ring_applies(topology, beta) else None


def _trees(topology: Topology, size: Fraction, check: bool, pieces: int | None) -> Schedule:
    """The tree packing (:func:`~resilientcc.schedules.tree_packing.tree_allreduce`) as
    OptCC's schedule."""
    from resilientcc.schedules.tree_packing import tree_allreduce

    return replace(tree_allreduce(topology, size, check=check, pieces=pieces), name="optcc")


def _with_rule(schedule: Schedule, choice: VariantChoice) -> Schedule:
    """``schedule`` with the rule that chose its variant in its meta (``variant_rule``)."""
    return replace(schedule, meta=(*schedule.meta, ("variant_rule", choice.rule)))


def _check_int(name: str, value: object, least: int) -> None:
    """An integer option (``None`` = its default) of at least ``least`` (0 or 1); booleans
    are not integers here."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        kind = {0: "a non-negative integer", 1: "a positive integer"}[least]
        raise ScheduleError(f"optcc: {name} must be {kind}, got {value!r}")


@gc_paused
def optcc(
    topology: Topology,
    size: Fraction,
    *,
    check: bool = True,
    pieces: int | None = None,
    max_serial: int = 2,
    window: int | None = None,
    ramp: bool = True,
    ag_offset: int = 0,
    stage: bool = False,
    degraded_connections: int = 1,
    flat_bcast: bool = False,
    decouple: bool = True,
    balance: bool | None = None,
    avoid_stage: bool = False,
    direct: bool = False,
    ring_fraction: Fraction | None = None,
    pipeline: bool | None = None,
    net_window: int | None = None,
    weighted_ring: bool | None = None,
    hier_ring: bool | None = None,
    pipeline_timing: float | None = None,
    sliver: Fraction | None = None,
    relay: Fraction | None = None,
    flat_tail: int | None = None,
    network: str | None = None,
    nvlink_rs: str | None = None,
    nvlink_merge: int | None = None,
    own_lag: int | None = None,
    nvlink_channels: int | None = None,
    two_way_first: int | None = None,
    two_way_last: int | None = None,
    straggler_two_way: bool | None = None,
    relay_sum: bool | None = None,
    degraded_last: bool | None = None,
    sliver_gate: int | None = None,
    direct_first: int | None = None,
    ordered_rings: bool | None = None,
    rail_lp: bool | None = None,
    trees: bool | None = None,
    **options: Any,
) -> Schedule:
    """OptCC: bandwidth-aware direct AllReduce, pipelined in ``pieces``; see the module docs.

    Args:
        topology: the cluster (any failures).
        size: message size, in bytes (int, Fraction or float) or as text such as
            "1GiB" (:func:`~resilientcc.units.to_size`).
        check: run the exact executor before returning (skipped above
            :data:`~resilientcc.schedules._build.CHECK_CAP_TRANSFERS` transfers).
        pieces: pipeline depth (default from the size, :func:`~resilientcc.schedules.direct.default_pieces`).
        max_serial: most remote partials reduced into one GPU of the owner per chunk.
        window: if positive, a server's intra-server trees of piece ``k`` wait for its
            trees of piece ``k − window`` (a credit window; 0 = off; default 2).
        ramp: smaller first and last pieces (:func:`~resilientcc.schedules.direct.piece_weights`, ``cap=2`` up to
            :data:`~resilientcc.schedules.direct.DEEP_MAX_SERVERS` servers, else 4).
        ag_offset: return transfers on channel ``c + ag_offset·K`` (their own connections,
            the same NIC ``c``; 0 = share the scatter's connections).
        stage: stage a degraded sender's partial on a free GPU of the owner and fold it in
            last (decouples the straggler from the healthy servers' progress).
        degraded_connections: spread returns to a degraded server over this many
            connections per NIC (``c + j·K``).
        flat_bcast: healthy servers broadcast results flat (root copies to every GPU)
            instead of along a binomial tree.
        decouple: with exactly one server too slow to own a shard, return it the others'
            sum instead of the result (see the module docs).
        balance: order each intra-server tree so its busiest positions go to the GPUs
            that have moved least so far (default: on in the decoupled regime, where it
            measured 1.24 → 1.16 × the bound, above :data:`~resilientcc.schedules.direct.DEEP_MAX_SERVERS`
            servers, and with several degraded servers from
            :data:`SEVERAL_BALANCED_MIN_SERVERS` on; off otherwise, where it measured
            worse: 4 servers, 1 NIC lost, 5.64 → 5.96 ms).
        avoid_stage: keep healthy arrivals off the GPU where the straggler's partial
            lands (measured slightly worse; off).
        direct: use the direct schedule even when no server is degraded (by default
            OptCC is then NCCL's ring).
        ring_fraction: the fraction ``f`` of the buffer all-reduced by NCCL-style rings
            on the NICs alive everywhere, the rest by the decoupled direct schedule
            with the healthy servers as owners (see the module docs). Default, when
            exactly one server is degraded, it is in the coupled regime, at least two
            servers are healthy and a NIC is alive on every server: the straggler's
            bandwidth fraction ``β`` above :data:`~resilientcc.schedules.direct.DEEP_MAX_SERVERS` servers and
            ``2β − 1`` up to it; else ``0`` (direct schedule only).
            With ``f > 0`` the tail always uses balanced trees, the decoupled
            straggler and shared connections (``ag_offset`` to ``avoid_stage`` are ignored).
        pipeline: the pipelined hierarchical schedule
            (:mod:`~resilientcc.schedules.hier_pipeline`; ``pieces`` default
            :func:`~resilientcc.schedules.hier_pipeline.pipeline_depth`, or
            :func:`~resilientcc.schedules.hier_pipeline.default_healthy_pieces` with no
            degraded server). Default:
            on when it can run (degraded servers alike, their alive NICs at one
            bandwidth, one NIC per GPU) on up to :data:`PIPELINE_MAX_SERVERS` servers (on
            any number with several degraded servers) and neither ``ring_fraction`` nor
            ``direct`` is given; ``True`` asks for it on any
            number of servers (an error where it cannot run), ``False`` never.
        net_window: the pipelined schedule's credit window: a GPU sends its partials of
            piece ``k`` once the results of piece ``k − net_window`` are back (0 = off;
            default :func:`~resilientcc.schedules.hier_pipeline.default_net_window`,
            ``N + 2`` pieces of 16 MiB, up to :data:`PIPELINE_MAX_SERVERS` servers; off
            above, where it measured worse). The hierarchical ring holds the straggler's
            partials back the same way (default ``N + 2`` pieces of 16 MiB on any number
            of servers). Ignored by the other variants.
        weighted_ring: Balance's rings with the straggler's ring neighbours owning
            larger segments (:mod:`~resilientcc.schedules.weighted_ring`). Default: on
            above :data:`PIPELINE_MAX_SERVERS` servers with exactly one degraded server
            that keeps more than 3/4 of the bandwidth, where the hierarchical ring does
            not run (1 GiB, 16 × 8 GPUs, 1 NIC lost: 5.884 ms against 6.220 for the
            rings plus tail).
        hier_ring: the hierarchical ring (:mod:`~resilientcc.schedules.hier_ring`;
            ``pieces`` default
            :func:`~resilientcc.schedules.hier_ring.default_ring_pieces`, or
            :data:`SCALED_PIECES` from :data:`SCALED_MIN_SERVERS` servers on and
            :data:`HALVING_PIECES` from :data:`HALVING_MIN_SERVERS` on;
            ``net_window`` default as for ``pipeline``). Default: on
            where one server is degraded, the pipelined schedule could run
            (:func:`~resilientcc.schedules.hier_pipeline.pipeline_blocker`) and two
            servers are healthy, if it lost whole NICs and there are at least
            :data:`SLIVER_MIN_SERVERS` servers, or if the degraded one owns no shard
            (``β ≤ β*``); ``True`` asks for it wherever it can run, ``False`` never.
        pipeline_timing: the pipelined schedule orders its connections by estimated
            time, pieces ``pipeline_timing`` times a piece's estimated period apart
            (0 = piece by piece; see
            :func:`~resilientcc.schedules.hier_pipeline.hier_pipeline`). Default, and
            default ``pieces``, around a degraded server:
            :func:`~resilientcc.schedules.hier_pipeline.pipeline_depth`.
        sliver: in the hierarchical ring each degraded server owns this part of every
            piece (default :func:`~resilientcc.schedules.hier_ring.default_sliver`; 0 =
            none, every degraded server decoupled). Ignored by the other variants.
        relay: in the pipelined schedule each dead-rail GPU of a degraded server
            reduces this part of every piece and relays it to and from the alive GPUs
            over NVLink, whose stages are then direct on that server (default
            :func:`~resilientcc.schedules.hier_pipeline.pipeline_relay`: ``1/9`` with
            one of 8 NICs lost, from 256 MiB, on up to six servers; else 0, the ring).
            Ignored by the other variants.
        flat_tail: the pipelined schedule's last this many pieces end with a flat
            NVLink all-gather (every GPU copies what it holds straight to the others of
            its server; default
            :func:`~resilientcc.schedules.hier_pipeline.default_pipeline_flat_tail`: the
            pieces in the last 24 MiB around one degraded server on 4 servers or more, up
            to 256 MiB; else 0). The hierarchical ring's the same (default
            :func:`~resilientcc.schedules.hier_ring.default_flat_tail`, 0 from
            :data:`SCALED_MIN_SERVERS` servers on). Ignored by the other variants.
        network: how the hierarchical ring's healthy servers cross the network:
            ``"ring"``, ``"direct"`` or ``"halving"`` (recursive halving and doubling,
            :meth:`~resilientcc.schedules._build.Builder.halving_pass`). Default: rings,
            halving from :data:`HALVING_MIN_SERVERS` servers on, and for small buffers
            ``"direct"`` (:func:`small_network`: one hop each way, the owner's server
            folding the partials with an NVLink tree). Ignored by the other variants.
        nvlink_rs: the hierarchical ring's NVLink reduce-scatters: ``"ring"`` or
            ``"halving"`` (``⌈log2 G⌉`` hops instead of ``G − 1``). Default
            :func:`default_nvlink_rs`: halving up to :data:`NVLINK_HALVING_MAX_BYTES`.
            Ignored by the other variants.
        nvlink_merge: the hierarchical ring's NVLink passes move up to this many
            consecutive shards as one transfer (default 1, from
            :data:`SCALED_MIN_SERVERS` servers on all of a GPU's). Ignored by the
            other variants.
        own_lag: the degraded server returns the results of its own part of piece
            ``k`` (its sliver on the hierarchical ring, its share in the pipelined
            schedule) only after its partials of piece ``k + own_lag``. Default: on
            the ring :func:`~resilientcc.schedules.hier_ring.default_sliver_lag`, in
            the pipelined schedule
            :func:`~resilientcc.schedules.hier_pipeline.default_own_lag` (where that is
            ``None`` its results leave with their piece). Ignored where it owns nothing
            and by the other variants.
        nvlink_channels: the pipelined schedule's NVLink lanes: piece ``k``'s rings
            run on lane ``k mod nvlink_channels``
            (:func:`~resilientcc.schedules.hier_pipeline.nvlink_ring_channel`).
            Default: with no degraded server
            :func:`~resilientcc.schedules.hier_pipeline.default_healthy_lanes`, else 1.
            Ignored by the other variants.
        two_way_first: the hierarchical ring's first pieces whose network
            reduce-scatters run both ways where its rings run one way (default
            :func:`~resilientcc.schedules.hier_ring.default_two_way_first`: 2 where the
            straggler owns nothing, else 0). Ignored by the other variants.
        two_way_last: the hierarchical ring's last pieces whose network all-gathers
            run both ways, on connections of their own, where its rings run one way
            (default :func:`~resilientcc.schedules.hier_ring.default_two_way_last`: 4
            where the straggler owns nothing, else 0). Ignored by the other variants.
        direct_first: the hierarchical ring's first pieces whose network passes are
            direct, one hop each way (default
            :func:`~resilientcc.schedules.hier_ring.default_direct_first`: 8 on 10 to 20
            servers with at most one degraded, else 0). Ignored by the other variants.
        straggler_two_way: the hierarchical ring's NVLink all-gathers on the degraded
            server run both ways (default
            :func:`~resilientcc.schedules.hier_ring.default_straggler_two_way`: where it
            owns no sliver, or below 256 MiB; see
            :mod:`~resilientcc.schedules.hier_ring`). Ignored by the other variants.
        relay_sum: the pipelined schedule's relaying dead GPUs add their sums into the
            holders' own partials instead of copying totals over; ``degraded_last``: the
            degraded servers' network partials are reduced into each owner's shard
            after the healthy servers' (both default
            :func:`~resilientcc.schedules.hier_pipeline.default_relay_sum`: where it
            relays around two dead rails). Ignored by the other variants.
        sliver_gate: in the hierarchical ring the other servers' partials of piece
            ``k``'s sliver wait for the degraded server's partials of piece ``k −
            sliver_gate`` (0 = off; default the network window plus the sliver's lag;
            see :func:`~resilientcc.schedules.hier_ring.hier_ring`). Ignored where no
            degraded server owns a sliver and by the other variants.
        ordered_rings: Balance's rings in the server order whose narrowest hop is
            widest (:mod:`~resilientcc.schedules.ordered_rings`). Default: where
            :func:`ordered_rings_wins` (several degraded servers that differ), unless
            another variant is named; ``True`` asks for it, ``False`` never.
        rail_lp: the direct schedule's shares and each pair's rails from the linear
            program over every NIC (:func:`~resilientcc.schedules.rail_split.rail_split`).
            Default: where it lowers the busiest NIC by more than
            :data:`RAIL_LP_MIN_GAIN`; ``True`` always, ``False`` never. Ignored by the
            other variants.
        trees: the tree packing (:mod:`~resilientcc.schedules.tree_packing`) instead of
            the layered variants. Default: where :func:`packs_trees` says (GPUs outside
            servers, or a loaded graph of one-GPU servers); ``True`` always (up to 64
            GPUs), ``False`` never (GPUs outside servers are then an error).

    The knobs after ``max_serial`` are for experiments; the defaults are the best measured in the
    simulator (see ``docs/reproducing.md``).

    Examples:
        >>> from resilientcc.topology import hierarchical as cluster, fail_nics
        >>> s = optcc(fail_nics(cluster(4, 8), 0, 4), Fraction(2**30))
        >>> s.meta_get("share_straggler")
        '0'
    """
    size = generator_args("optcc", size, options)
    # every option is checked here, whichever variant runs (most are ignored by the
    # others), so a bad value is an error rather than silently unused
    for name, value, least in (
        ("pieces", pieces, 1),
        ("max_serial", max_serial, 1),
        ("window", window, 0),
        ("ag_offset", ag_offset, 0),
        ("degraded_connections", degraded_connections, 1),
        ("net_window", net_window, 0),
        ("flat_tail", flat_tail, 0),
        ("nvlink_merge", nvlink_merge, 1),
        ("own_lag", own_lag, 0),
        ("nvlink_channels", nvlink_channels, 1),
        ("two_way_first", two_way_first, 0),
        ("direct_first", direct_first, 0),
        ("two_way_last", two_way_last, 0),
        ("sliver_gate", sliver_gate, 0),
    ):
        _check_int(name, value, least)
    for name, flag in (
        ("ramp", ramp),
        ("stage", stage),
        ("flat_bcast", flat_bcast),
        ("decouple", decouple),
        ("balance", balance),
        ("avoid_stage", avoid_stage),
        ("direct", direct),
        ("straggler_two_way", straggler_two_way),
        ("relay_sum", relay_sum),
        ("degraded_last", degraded_last),
        ("rail_lp", rail_lp),
        ("trees", trees),
    ):
        if flag is not None and not isinstance(flag, bool):
            raise ScheduleError(f"optcc: {name} must be true or false, got {flag!r}")
    if pipeline_timing is not None:
        if (
            isinstance(pipeline_timing, bool)
            or not isinstance(pipeline_timing, int | float | Fraction)
            or not pipeline_timing >= 0
        ):
            raise ScheduleError(
                f"optcc: pipeline_timing must be a non-negative number, got {pipeline_timing!r}"
            )
        pipeline_timing = float(pipeline_timing)
    if network is not None:
        check_network(network)
    if nvlink_rs is not None:
        check_network(nvlink_rs, "nvlink_rs", NVLINK_PASSES)
    graph_rule = None if trees is False else packs_trees(topology)
    if graph_rule is not None:
        # a graph of GPUs: the packing of trees works from the graph alone
        rule = _ASKED if trees else graph_rule
        return _with_rule(_trees(topology, size, check, pieces), VariantChoice("trees", rule))
    servers = optcc_view(topology, size)
    n = len(servers)
    bw = {sv.index: sv.bandwidth for sv in servers}
    shares = balanced_shares(bw)
    if relay is not None:
        try:
            relay = Fraction(str(relay))
        except (ValueError, ZeroDivisionError):
            raise ScheduleError(f"optcc: relay must be a number, got {relay!r}") from None
    if sliver is not None:
        try:
            sliver = Fraction(str(sliver))
        except (ValueError, ZeroDivisionError):
            raise ScheduleError(f"optcc: sliver must be a number, got {sliver!r}") from None
        if not 0 <= sliver < 1:
            raise ScheduleError(f"optcc: the straggler's sliver must be in [0, 1), got {sliver}")
    choice = _choice(
        topology,
        servers,
        shares,
        size,
        hier_ring=hier_ring,
        pipeline=pipeline,
        weighted_ring=weighted_ring,
        ordered_rings=ordered_rings,
        ring_fraction=ring_fraction,
        direct=direct,
        trees=trees,
    )
    if choice.variant == "trees":
        return _with_rule(_trees(topology, size, check, pieces), choice)
    if choice.variant == "ordered_rings":
        return _with_rule(_ordered_rings(topology, size, check), choice)
    if choice.variant in ("hier_ring", "pipeline"):
        layered = _layered(
            topology,
            servers,
            shares,
            size,
            pieces,
            check,
            net_window,
            rings=choice.variant == "hier_ring",
            pipeline_timing=pipeline_timing,
            sliver=sliver,
            relay=relay,
            flat_tail=flat_tail,
            network=network,
            nvlink_rs=nvlink_rs,
            nvlink_merge=nvlink_merge,
            own_lag=own_lag,
            nvlink_channels=nvlink_channels,
            two_way_first=two_way_first,
            two_way_last=two_way_last,
            straggler_two_way=straggler_two_way,
            relay_sum=relay_sum,
            degraded_last=degraded_last,
            sliver_gate=sliver_gate,
            direct_first=direct_first,
        )
        return _with_rule(layered, choice)
    if choice.variant == "weighted_ring":
        assert choice.relief is not None
        base = weighted_ring_schedule(topology, size, *choice.relief, check=check)
        meta = (("generator", "optcc"), *base.meta, ("variant", "weighted ring"))
        return _with_rule(replace(base, name="optcc", meta=meta), choice)
    if choice.variant == "ring":
        base = ring(topology, size, check=check)
        two = (
            len(servers) == 2 and topology.num_ranks == 2 and not all(sv.healthy for sv in servers)
        )
        label = "ring (two GPUs)" if two else "ring (no degraded server)"
        meta = (("generator", "optcc"), ("variant", label))
        return _with_rule(replace(base, name="optcc", meta=meta), choice)
    if window is None:
        window = 2
    nics = max(sv.nics for sv in servers)
    b = Builder("optcc", topology.num_ranks)
    b.order_by_release = True
    f = _ring_fraction(servers, shares, ring_fraction, size)
    if f > 0:
        plan, k = _ring_split(b, servers, f, size, pieces, window, max_serial, ramp)
    else:
        plan = _direct_plan(servers, shares, rail_lp, decouple)
        shares = plan.shares
        # decoupled regime: exactly one server too slow to own a shard (β ≤ β*)
        decoupled = decouple and sum(1 for w in shares.values() if w == 0) == 1
        several = len(_degraded(servers)) > 1
        if balance is None:
            balance = (
                decoupled or n > DEEP_MAX_SERVERS or (several and n >= SEVERAL_BALANCED_MIN_SERVERS)
            )
        k = (
            pieces
            if pieces is not None
            else default_pieces(depth_bytes(servers, size), n, decoupled=decoupled, several=several)
        )
        direct_allreduce(
            b,
            servers,
            Fraction(1),
            k,
            plan,
            max_serial=max_serial,
            total_bytes=float(size),
            window=window,
            piece_weights=piece_weights(k, 2 if n <= DEEP_MAX_SERVERS else 4) if ramp else None,
            ag_channel_offset=nics * ag_offset,
            stage_degraded=stage,
            degraded_connections=degraded_connections,
            flat_bcast=bool(flat_bcast),
            decouple=decouple,
            balance=bool(balance),
            avoid_stage=avoid_stage,
        )
    meta = (
        ("generator", "optcc"),
        ("pieces", str(k)),
        ("max_serial", str(max_serial)),
        *_share_meta(servers, shares),
        ("rail_weights", ",".join(f"{c}:{plan.lam[c]}" for c in sorted(plan.lam))),
        ("ring_fraction", str(f)),
        ("variant", "rings + decoupled direct" if f > 0 else "direct"),
    )
    built = b.build(size, topology=topology.shape_fingerprint, meta=meta, check=check)
    return _with_rule(built, choice)
