"""Shared pieces of the ``rcc`` command line: topology options and error handling.

The CLI is thin: parse → build domain objects → one library call → print. Every
:class:`~resilientcc.errors.ResilientCCError` becomes a one-line ``error: ...`` on
stderr and exit code 2, with no traceback.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from resilientcc.errors import InputError, ResilientCCError, TopologyError
from resilientcc.topology import apply_fail_specs, hierarchical, load_topology
from resilientcc.topology.model import Topology
from resilientcc.units import parse_bandwidth, parse_size

__all__ = [
    "EXIT_BAD_INPUT",
    "FabricOpt",
    "FailOpt",
    "GeneratorOpt",
    "GpusOpt",
    "NicBwOpt",
    "NicsOpt",
    "NvlinkBwOpt",
    "ServersOpt",
    "SizeOpt",
    "TopologyFileOpt",
    "build_topology",
    "die",
    "generator_options",
    "handle_errors",
    "load_schedule_file",
    "load_schedule_for",
    "parse_size_option",
]

EXIT_BAD_INPUT = 2

ServersOpt = Annotated[int, typer.Option("--servers", "-n", help="Number of servers.")]
GpusOpt = Annotated[int, typer.Option("--gpus-per-server", "-g", help="GPUs per server.")]
NicsOpt = Annotated[
    int | None, typer.Option("--nics-per-server", help="NICs per server [default: one per GPU].")
]
NicBwOpt = Annotated[
    str, typer.Option("--nic-bw", help="Per-NIC bandwidth, e.g. 400Gbps or 50GB/s.")
]
NvlinkBwOpt = Annotated[
    str, typer.Option("--nvlink-bw", help="Per-GPU NVLink bandwidth per direction, e.g. 450GB/s.")
]
FabricOpt = Annotated[str, typer.Option("--fabric", help="Network fabric: rail or switch.")]
FailOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--fail",
        help="Failure SERVER:K (K NICs down), SERVER:nic1,nic5 (those NICs), SERVER:x0.5 "
        "(NIC bandwidth scaled), or SERVER:nic1x0.5 (one NIC's bandwidth scaled). Repeatable.",
    ),
]
TopologyFileOpt = Annotated[
    Path | None,
    typer.Option("--topology", help="Topology JSON file (instead of the builder options)."),
]
SizeOpt = Annotated[str, typer.Option("--size", "-s", help="Message size, e.g. 1GiB, 256MiB, 4MB.")]
GeneratorOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        "-O",
        help="A generator option KEY=VALUE, e.g. -O pieces=64 -O sliver=1/16 (repeatable; "
        "-O help lists the algorithm's options).",
    ),
]


def die(message: str, code: int = EXIT_BAD_INPUT) -> None:
    """Print ``error: message`` to stderr and exit with ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn library errors into one-line messages and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except typer.Exit:
            raise
        except ResilientCCError as e:
            die(str(e))
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def parse_size_option(text: str, what: str = "--size") -> Any:
    """A message size in bytes: positive and whole (``1.5GiB`` is, ``1.5B`` is not)."""
    size = parse_size(text, what)
    if size != int(size):
        raise InputError(f"{what}: {text!r} is not a whole number of bytes")
    return size


#: the builder's options (parameter name -> flag), which ``--topology`` replaces
BUILDER_OPTIONS = {
    "servers": "--servers",
    "gpus_per_server": "--gpus-per-server",
    "nics_per_server": "--nics-per-server",
    "nic_bw": "--nic-bw",
    "nvlink_bw": "--nvlink-bw",
    "fabric": "--fabric",
}


def build_topology(ctx: Any) -> Topology:
    """The cluster a command's options describe: a ``--topology`` file or the builder
    (``--servers`` … ``--fabric``), then ``--fail`` applied.

    Reads the options from the command's context, under the parameter names of the
    shared option types above (``servers``, ``gpus_per_server``, ``nics_per_server``,
    ``nic_bw``, ``nvlink_bw``, ``fabric``, ``fail``, ``topology_file``). With a file, a
    builder option also typed on the command line is an error rather than silently
    ignored.
    """
    opts = ctx.params
    topology_file: Path | None = opts["topology_file"]
    if topology_file is not None:
        # typed by the user, not defaults (get_parameter_source: None for unknown names)
        sources = {flag: ctx.get_parameter_source(name) for name, flag in BUILDER_OPTIONS.items()}
        clash = [
            flag for flag, src in sources.items() if src is not None and src.name == "COMMANDLINE"
        ]
        if clash:
            raise InputError(
                f"--topology: {', '.join(clash)} cannot be combined with a topology file "
                "(the file describes the cluster; --fail still applies)"
            )
        topo = load_topology(topology_file)
    else:
        fabric = opts["fabric"]
        if fabric not in ("rail", "switch"):
            raise InputError(f"--fabric: must be 'rail' or 'switch', got {fabric!r}")
        nic_bw = parse_bandwidth(opts["nic_bw"], "--nic-bw")
        nvlink_bw = parse_bandwidth(opts["nvlink_bw"], "--nvlink-bw")
        try:
            topo = hierarchical(
                opts["servers"],
                opts["gpus_per_server"],
                opts["nics_per_server"],
                nic_bw=nic_bw,
                nvlink_bw=nvlink_bw,
                fabric=fabric,
            )
        except TopologyError as e:
            # the builder names its parameters as the flags do, less the dashes
            head, sep, rest = str(e).partition(": ")
            words = head.split(" × ")
            if not sep or any(f"--{w}" not in BUILDER_OPTIONS.values() for w in words):
                raise
            raise InputError(" × ".join(f"--{w}" for w in words) + f": {rest}") from None
    return apply_fail_specs(topo, opts["fail"] or [])


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()


def load_schedule_file(path: Path) -> Any:
    """Read a schedule file: MSCCL XML by its ``.xml`` suffix, else resilientcc JSON."""
    from resilientcc.schedules.msccl import load_msccl
    from resilientcc.schedules.serialize import load_schedule

    return load_msccl(path) if path.suffix == ".xml" else load_schedule(path)


def load_schedule_for(path: Path, topo: Topology) -> Any:
    """Read a schedule file (:func:`load_schedule_file`) and check that it was made for
    ``topo``'s GPUs; raises ScheduleError naming the file otherwise."""
    from resilientcc.errors import ScheduleError

    sched = load_schedule_file(path)
    fp = topo.shape_fingerprint
    if sched.ranks != topo.num_ranks or (sched.topology is not None and sched.topology != fp):
        raise ScheduleError(
            f"{path}: schedule was made for another topology ({sched.ranks} ranks, "
            f"fingerprint {sched.topology}; this cluster: {topo.num_ranks} ranks, {fp})"
        )
    return sched


#: parameters of every generator that are not options of the schedule
_NOT_OPTIONS = ("topology", "size", "check", "options")


def _option_value(text: str) -> object:
    """``true``/``false``/``none``, an integer, an exact number (``1/16``, ``0.125``), or text."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    try:
        whole = int(low)
    except ValueError:
        pass
    else:
        return whole if abs(whole) <= 2**60 else Fraction(whole)
    try:
        exact = Fraction(low)
    except (ValueError, ZeroDivisionError):
        return text.strip()
    return int(exact) if exact.denominator == 1 and abs(exact) <= 2**60 else exact


def generator_options(algorithm: str, items: list[str] | None) -> dict[str, object]:
    """``-O KEY=VALUE`` items as keyword options of ``algorithm``'s generator.

    ``-O help`` prints the generator's options with their defaults and exits 0. A key
    that is not one of them is an error naming those that are; the generator itself
    checks the values.

    >>> generator_options("optcc", ["pieces=64", "sliver=1/16", "hier_ring=true"])
    {'pieces': 64, 'sliver': Fraction(1, 16), 'hier_ring': True}
    """
    import inspect

    from resilientcc.schedules.generators import get_generator

    if not items:
        return {}
    gen = get_generator(algorithm)
    params = {
        name: p.default
        for name, p in inspect.signature(gen).parameters.items()
        if name not in _NOT_OPTIONS and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }
    if any(item.strip().lower() == "help" for item in items):
        if params:
            typer.echo(f"{algorithm} options (-O KEY=VALUE), with their defaults:")
            for name, default in params.items():
                typer.echo(f"  {name} = {default}")
            typer.echo(
                f"what they do: help(resilientcc.schedules.generators.get_generator({algorithm!r}))"
            )
        else:
            typer.echo(f"{algorithm} has no options")
        raise typer.Exit(0)
    out: dict[str, object] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise InputError(f"-O {item!r}: expected KEY=VALUE, e.g. -O pieces=64")
        if key not in params:
            known = ", ".join(params) or "none"
            raise InputError(f"-O {key}: not an option of {algorithm} (its options: {known})")
        if key in out:
            raise InputError(f"-O {key}: given twice")
        val = _option_value(value)
        if isinstance(val, Fraction) and abs(val) > 2**60:
            raise InputError(f"-O {key}={value.strip()}: too large")
        out[key] = val
    return out
