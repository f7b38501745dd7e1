"""``rcc run``: execute a schedule on real buffers (threads; local queues or gloo) and check it."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from resilientcc.cli.app import app
from resilientcc.cli.common import (
    FabricOpt,
    FailOpt,
    GeneratorOpt,
    GpusOpt,
    NicBwOpt,
    NicsOpt,
    NvlinkBwOpt,
    ServersOpt,
    SizeOpt,
    TopologyFileOpt,
    build_topology,
    generator_options,
    handle_errors,
    load_schedule_file,
    load_schedule_for,
    parse_size_option,
)
from resilientcc.errors import InputError

if TYPE_CHECKING:  # the runtime and the schedules are imported when a command runs
    from resilientcc.runtime import ChannelFailure, RunResult
    from resilientcc.schedules.ir import Schedule

__all__ = ["parse_channel_failure", "run"]

EXIT_WRONG_RESULT = 1
#: from this many transfers ``rcc run`` says on stderr that the run takes a while (one
#: message and one acknowledgement per transfer: over gloo on 2 cores about 1,000
#: transfers a second; OptCC's tree packing on one server of 8 GPUs at 16 MiB has 57,344)
LONG_RUN_TRANSFERS = 20_000


def parse_channel_failure(text: str, option: str = "--fail-channel") -> ChannelFailure:
    """``RANK:CHANNEL[:AFTER[:OUTCOME]]`` → a :class:`~resilientcc.runtime.ChannelFailure`
    (for ``--fail-nic`` the same numbers read ``SERVER:NIC``).

    >>> parse_channel_failure("3:1:5:delivered")
    ChannelFailure(rank=3, channel=1, after=5, outcome='delivered', peers=())
    >>> parse_channel_failure("0:2")
    ChannelFailure(rank=0, channel=2, after=0, outcome='lost', peers=())
    """
    from resilientcc.runtime import OUTCOMES, ChannelFailure

    parts = text.split(":")
    where = f"{option} {text!r}"
    first, second = ("SERVER", "NIC") if option == "--fail-nic" else ("RANK", "CHANNEL")
    if not 2 <= len(parts) <= 4:
        raise InputError(f"{where}: expected {first}:{second}[:AFTER[:OUTCOME]], e.g. 0:1:3:lost")
    try:
        numbers = [int(p) for p in parts[:3]]
    except ValueError:
        raise InputError(f"{where}: {first}, {second} and AFTER must be whole numbers") from None
    if min(numbers) < 0:
        raise InputError(f"{where}: {first}, {second} and AFTER must not be negative")
    outcome = parts[3] if len(parts) == 4 else "lost"
    if outcome not in OUTCOMES:
        raise InputError(f"{where}: OUTCOME must be one of {', '.join(OUTCOMES)}")
    return ChannelFailure(numbers[0], numbers[1], numbers[2] if len(numbers) > 2 else 0, outcome)


def _backend(name: str) -> str:
    from resilientcc.runtime import BACKENDS, gloo_available

    if name == "auto":
        return "gloo" if gloo_available() else "local"
    if name not in BACKENDS:
        raise InputError(f"--backend: must be auto, {', '.join(BACKENDS)}; got {name!r}")
    return name


@app.command("run")
@handle_errors
def run(
    ctx: typer.Context,
    schedule: Annotated[
        str,
        typer.Argument(help="A schedule JSON file, or an algorithm (ring, balance, optcc, ...)."),
    ],
    size: SizeOpt = "1MiB",
    servers: ServersOpt = 2,
    gpus_per_server: GpusOpt = 4,
    nics_per_server: NicsOpt = None,
    nic_bw: NicBwOpt = "400Gbps",
    nvlink_bw: NvlinkBwOpt = "450GB/s",
    fabric: FabricOpt = "rail",
    fail: FailOpt = None,
    topology_file: TopologyFileOpt = None,
    option: GeneratorOpt = None,
    elements: Annotated[
        int, typer.Option("--elements", help="Numbers (float64) in each rank's buffer.")
    ] = 4096,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            help="gloo (torch.distributed on the CPU), local (in-process queues), or auto "
            "(gloo when torch is installed).",
        ),
    ] = "auto",
    fail_channel: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-channel",
            help="Kill channel (NIC) CHANNEL of RANK as it sends its AFTER-th transfer on it: "
            "RANK:CHANNEL[:AFTER[:OUTCOME]], OUTCOME lost (default) or delivered (the sender "
            "knows at once), or silent (the channel swallows what it is given until the "
            "sender's acknowledgement timeout). Repeatable.",
        ),
    ] = None,
    fail_nic: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-nic",
            help="Kill NIC of SERVER both ways: every GPU of the server that sends on it, and "
            "every other GPU's sends on that rail into the server, each as it sends its "
            "AFTER-th transfer there: SERVER:NIC[:AFTER[:OUTCOME]]. Repeatable.",
        ),
    ] = None,
    no_dedup: Annotated[
        bool,
        typer.Option(
            "--no-dedup",
            help="Receivers commit re-sent transfers again (the protocol without its "
            "duplicate check; to see what it protects against).",
        ),
    ] = False,
    processes: Annotated[
        bool,
        typer.Option(
            "--processes",
            help="Every rank a process of its own in torch.distributed's default gloo group "
            "(else a thread; needs torch).",
        ),
    ] = False,
    distributed: Annotated[
        bool,
        typer.Option(
            "--distributed",
            help="This process is one rank of a torch.distributed job that a launcher "
            "started (torchrun: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); every rank runs "
            "the same command and rank 0 prints.",
        ),
    ] = False,
    verify_first: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Prove the schedule with Z3 first (lossless, race-free, deadlock-free, and "
            "failover-lossless with --fail-channel); run only what is proved.",
        ),
    ] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the inputs.")] = 0,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds a rank may wait for a message.")
    ] = 60.0,
    ack_timeout: Annotated[
        float,
        typer.Option(
            "--ack-timeout",
            help="Seconds a channel with sends waiting to a rank may go without an "
            "acknowledgement from it before the sender gives the channel up for that rank and "
            "re-sends on another (how silent failures are found; a live one given up costs "
            "only re-sends).",
        ),
    ] = 10.0,
    trace_file: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Write the run's timeline: FILE.csv (every send, commit, failure), or "
            "FILE.json, a Chrome trace for Perfetto (a bar per transfer, marks for failures).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run SCHEDULE on real buffers (every rank a thread, a process, or a process that a
    launcher started) and check every rank's result.

    Example: rcc run optcc -n 2 -g 4 --fail 0:1 --fail-channel 0:0:3:delivered

    Each rank's buffer holds whole numbers, so the sum is exact in any order; the run
    is right when every rank ends with the sum of all inputs. A killed channel's
    transfers move to the rank's next live channel and the receivers drop duplicates.
    With --verify the schedule is proved first (Z3) and run only if it is. Exit code 1
    when a result is wrong.
    """
    from resilientcc.runtime import nic_failures, run_schedule
    from resilientcc.schedules.executor import check

    if elements < 1:
        raise InputError(f"--elements: must be at least 1, got {elements}")
    if timeout <= 0:
        raise InputError(f"--timeout: must be positive, got {timeout:g}")
    if ack_timeout <= 0:
        raise InputError(f"--ack-timeout: must be positive, got {ack_timeout:g}")
    if trace_file is not None:
        from resilientcc.sim.trace import trace_format

        trace_format(trace_file)  # a bad path fails before the run
    failures: list[ChannelFailure] = [parse_channel_failure(t) for t in fail_channel or []]
    nics = [parse_channel_failure(t, "--fail-nic") for t in fail_nic or []]
    if distributed and (processes or backend == "local"):
        raise InputError(
            "--distributed: the launcher starts the processes and they talk over gloo; "
            "drop --processes and --backend local"
        )
    chosen = "gloo" if (processes or distributed) and backend == "auto" else _backend(backend)
    path = Path(schedule)
    if path.is_file():
        if option:
            raise InputError("-O: options shape a generated schedule, not a schedule file")
        if nics:  # the schedule must be for the cluster the options describe
            topo = build_topology(ctx)
            sched = check(load_schedule_for(path, topo))
        else:
            sched = check(load_schedule_file(path))
    elif path.suffix.lower() in (".json", ".xml") or "/" in schedule:
        raise InputError(f"{schedule}: no such schedule file")
    else:
        from resilientcc.schedules.generators import generate

        topo = build_topology(ctx)
        sched = generate(
            schedule, topo, parse_size_option(size), **generator_options(schedule, option)
        )
    for f in nics:  # parsed as RANK:CHANNEL: here SERVER:NIC
        failures += nic_failures(sched, topo, f.rank, f.channel, f.after, f.outcome)
    rank = 0
    if distributed:
        from resilientcc.runtime import launched_rank, run_distributed

        rank = launched_rank()[0]  # every rank proves it (same answer) and only 0 prints
    if verify_first:
        _verify(sched, failover=bool(failures), quiet=as_json or rank != 0)
    how: dict[str, Any] = {
        "elements": elements,
        "failures": failures,
        "dedup": not no_dedup,
        "seed": seed,
        "idle_timeout_s": timeout,
        "ack_timeout_s": ack_timeout,
        "trace": trace_file is not None,
    }
    if len(sched.transfers) >= LONG_RUN_TRANSFERS and rank == 0 and not as_json:
        typer.echo(
            f"running {sched.name}: {len(sched.transfers):,} transfers, one message each,"
            " this can take a while (a smaller --size gives fewer)",
            err=True,
        )
    if distributed:
        rank, result = run_distributed(sched, **how)
    else:
        result = run_schedule(sched, backend=chosen, processes=processes, **how)
    if rank == 0:  # under a launcher, the others stay quiet
        _report(result, sched, trace_file, as_json)
    if not result.exact:
        raise typer.Exit(EXIT_WRONG_RESULT)


def _verify(sched: Schedule, *, failover: bool, quiet: bool) -> None:
    """Prove ``sched`` (Z3) or stop with the first property that is not proved."""
    from resilientcc.verify import verify

    report = verify(sched, failover=failover)
    if not report.proved:
        bad = next(r for r in report.results if r.verdict != "proved")
        raise InputError(
            f"--verify: {bad.property} {bad.verdict} ({bad.detail}); not running it"
            if bad.detail
            else f"--verify: {bad.property} {bad.verdict}; not running it"
        )
    if not quiet:
        props = ", ".join(r.property for r in report.results)
        seconds = sum(r.seconds for r in report.results)
        typer.echo(f"verified: {props} proved in {seconds:.2f} s")


def _report(result: RunResult, sched: Schedule, trace_file: Path | None, as_json: bool) -> None:
    """Write the trace file, if asked, and print the result (JSON: without the events)."""
    if trace_file is not None:
        from resilientcc.runtime import write_run_trace

        write_run_trace(result, sched, trace_file)
    if as_json:
        summary = {f.name: getattr(result, f.name) for f in fields(result) if f.name != "events"}
        typer.echo(json.dumps(summary))
        return
    _print(result)
    if trace_file is not None:
        typer.echo(f"wrote {trace_file} ({len(result.events):,} events)")


def _print(r: RunResult) -> None:
    typer.echo(
        f"ran {r.schedule}: {r.ranks} ranks, {r.transfers:,} transfers, {r.elements:,} float64 "
        f"per buffer, backend {r.backend} ({_ranks_as(r)}), "
        f"{r.wall_s * 1e3:.1f} ms wall"
    )
    typer.echo(
        f"  messages: {r.sent:,} data ({r.payload_elements * 8 / 2**20:.2f} MiB), "
        f"{r.control_messages:,} acknowledgements and notices"
    )
    if r.failed or r.migrations:
        moved = ", ".join(
            f"rank {rk} channel {c} -> {alt}" for rk, c, alt in dict.fromkeys(r.migrations)
        )
        typer.echo(
            f"  channel failures: {r.failed} (given up: {moved}); {r.resent} re-sent, "
            f"{r.duplicates} duplicate{'s' if r.duplicates != 1 else ''} "
            + ("dropped" if r.dedup else "committed again (--no-dedup)")
        )
    if r.dropped:
        typer.echo(
            f"  silent failures: {r.dropped} message{'s' if r.dropped != 1 else ''} swallowed, "
            f"found after at most {r.detect_s:.2f} s (acknowledgement timeout "
            f"{r.ack_timeout_s:g} s)"
        )
    typer.echo(
        f"  longest wait for an acknowledgement: {r.max_ack_gap_s * 1e3:.1f} ms "
        f"(a channel is given up for a receiver after {r.ack_timeout_s:g} s)"
    )
    if r.exact:
        typer.echo(f"result: exact on all {r.ranks} ranks (every rank holds the sum of all inputs)")
    else:
        typer.echo(
            f"result: WRONG on {len(r.wrong_ranks)} of {r.ranks} ranks "
            f"({', '.join(map(str, r.wrong_ranks[:8]))}{', ...' if len(r.wrong_ranks) > 8 else ''}); "
            f"largest error {r.max_error:g}"
        )


def _ranks_as(r: RunResult) -> str:
    if r.distributed:
        return "processes started by the launcher"
    return "processes" if r.processes else "threads"
