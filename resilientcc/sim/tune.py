"""Choosing a generator's variant by simulating them: :func:`tune`.

OptCC picks its variant (pipelined, hierarchical ring, direct, ordered rings, tree packing, ...) by
rules measured on the simulator (:func:`~resilientcc.schedules.optcc.optcc`). Where
several servers are degraded in different ways, the rules cannot always tell the
variants apart (at 64 MiB the rules' choice was behind the best variant in 13 of 30
random patterns, by up to 23 %). :func:`tune` generates every variant, simulates each
on the cluster and returns the fastest, with the time of every one.

It sits above the generators (the simulator may not be imported by
:mod:`resilientcc.schedules`), so ``optcc`` itself never simulates; ``rcc synth ...
--tune`` and ``rcc sim ... --tune`` call this. It costs one generation and one
simulation per variant that runs: up to a few seconds per variant on 8 servers at 256
MiB, minutes on 16 servers at 1 GiB.

Examples:
    >>> from fractions import Fraction
    >>> from resilientcc.topology import apply_fail_specs, hierarchical
    >>> t = apply_fail_specs(hierarchical(4, 2), ["1:x3/4", "2:x3/4", "3:x3/4"])
    >>> r = tune(t, Fraction(64 * 2**20))
    >>> r.trial("rules").variant, r.label, r.schedule.meta_get("tuned")
    ('pipelined hierarchical', 'tree packing', 'tree packing')
    >>> r.time_s <= r.trial("rules").time_s
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from resilientcc.errors import InputError, ScheduleError
from resilientcc.schedules.ir import Schedule
from resilientcc.schedules.optcc import VARIANT_LABELS, VARIANT_OPTIONS
from resilientcc.sim.flow import simulate
from resilientcc.sim.result import SimResult
from resilientcc.topology.model import Topology
from resilientcc.units import format_time

__all__ = ["OPTCC_VARIANTS", "Trial", "TuneResult", "default_variants", "tune"]

#: OptCC's variants that :func:`tune` tries, in order: its own rules first (kept on a
#: tie), then each variant that can be asked for, by its label and options
#: (:data:`~resilientcc.schedules.optcc.VARIANT_LABELS`,
#: :data:`~resilientcc.schedules.optcc.VARIANT_OPTIONS`). A variant that cannot run on
#: the cluster (the pipelined schedule where the degraded servers differ, the
#: hierarchical ring without two healthy servers, ...) is skipped with the reason.
OPTCC_VARIANTS: tuple[tuple[str, Mapping[str, object]], ...] = (
    ("rules", {}),
    *((VARIANT_LABELS[v], dict(opts)) for v, opts in VARIANT_OPTIONS.items()),
)


@dataclass(frozen=True)
class Trial:
    """One variant :func:`tune` tried.

    Attributes:
        label: the variant's name (``"rules"`` for the generator's own choice).
        options: the generator options that ask for it.
        time_s: its simulated time, or ``None`` where it did not run.
        note: why it did not run (the generator's message), or which earlier variant
            gave the same schedule (not simulated again); else ``""``.
        variant: the schedule's own ``variant`` meta, where it has one.
    """

    label: str
    options: tuple[tuple[str, object], ...]
    time_s: float | None
    note: str = ""
    variant: str = ""


@dataclass(frozen=True)
class TuneResult:
    """What :func:`tune` returns.

    Attributes:
        schedule: the fastest variant's schedule, checked exactly, its meta extended
            with ``tuned`` (the label) and ``tune_trials`` (every label and time).
        label: the fastest variant's label.
        trials: every variant tried, in order.
        result: its simulation, for a caller that reports it without simulating it
            again.
    """

    schedule: Schedule
    label: str
    trials: tuple[Trial, ...]
    result: SimResult

    @property
    def time_s(self) -> float:
        """The fastest variant's simulated time, in seconds."""
        return self.result.time_s

    def trial(self, label: str) -> Trial:
        """The trial called ``label`` (KeyError if none)."""
        for t in self.trials:
            if t.label == label:
                return t
        raise KeyError(label)


def default_variants(algorithm: str) -> tuple[tuple[str, Mapping[str, object]], ...]:
    """The variants :func:`tune` tries for ``algorithm`` (only OptCC has several)."""
    from resilientcc.schedules.generators import get_generator

    gen = get_generator(algorithm)
    if gen.__name__ != "optcc":
        raise InputError(
            f"tune: {algorithm} has one variant; only optcc chooses among several"
            " (or pass the variants to try)"
        )
    return OPTCC_VARIANTS


def _describe(trial: Trial) -> str:
    if trial.time_s is None:
        return f"{trial.label}: -"
    return f"{trial.label}: {format_time(trial.time_s)}"


def tune(
    topology: Topology,
    size: Fraction,
    algorithm: str = "optcc",
    variants: Sequence[tuple[str, Mapping[str, object]]] | None = None,
    *,
    check: bool = True,
    progress: Callable[[Trial], None] | None = None,
    **sim_options: Any,
) -> TuneResult:
    """Generate each variant of ``algorithm``, simulate it, and return the fastest.

    Args:
        topology: the cluster, failures included.
        size: the message size in bytes.
        algorithm: the generator (default ``"optcc"``).
        variants: ``(label, options)`` pairs, each the generator's options for one
            variant (default :func:`default_variants`: for OptCC
            :data:`OPTCC_VARIANTS`). The first wins ties.
        check: check the chosen schedule with the exact executor before returning it
            (the variants are generated unchecked).
        progress: called with each :class:`Trial` once it is done.
        **sim_options: passed to :func:`~resilientcc.sim.flow.simulate`
            (``base_latency``, ``zero_latency``, ``latency_mode``, ``engine``).

    Returns:
        A :class:`TuneResult`.

    Raises:
        InputError: no variants, a label twice, or an unknown algorithm.
        ScheduleError: no variant can run on the cluster (the first one's reason).
    """
    from resilientcc.schedules.executor import check as check_exact
    from resilientcc.schedules.generators import get_generator

    gen = get_generator(algorithm)
    tried = default_variants(algorithm) if variants is None else tuple(variants)
    if not tried:
        raise InputError("tune: no variants to try")
    labels = [label for label, _ in tried]
    if len(set(labels)) != len(labels):
        raise InputError(f"tune: variant labels must differ, got {labels}")
    trials: list[Trial] = []
    seen: list[tuple[Schedule, Trial]] = []  # each schedule simulated, with its trial
    best: tuple[SimResult, Schedule, str] | None = None
    first_error: ScheduleError | None = None
    for label, options in tried:
        opts = tuple(sorted(options.items()))
        try:
            sched = gen(topology, size, check=False, **options)
        except ScheduleError as exc:
            first_error = first_error or exc
            trial = Trial(label, opts, None, note=str(exc))
        else:
            variant = sched.meta_get("variant") or ""
            # the same transfers (the meta say why a variant ran, and differ)
            work = replace(sched, meta=())
            same = next((t for s, t in seen if s == work), None)
            if same is not None:
                trial = Trial(
                    label, opts, same.time_s, note=f"same as {same.label}", variant=variant
                )
            else:
                res = simulate(sched, topology, **sim_options)
                trial = Trial(label, opts, res.time_s, variant=variant)
                seen.append((work, trial))
                if best is None or res.time_s < best[0].time_s:
                    best = (res, sched, label)
        trials.append(trial)
        if progress is not None:
            progress(trial)
    if best is None:
        assert first_error is not None
        raise ScheduleError(f"tune: no variant of {algorithm} runs here: {first_error}")
    result, sched, label = best
    if check:
        sched = check_exact(sched)
    summary = "; ".join(_describe(t) for t in trials)
    sched = replace(sched, meta=(*sched.meta, ("tuned", label), ("tune_trials", summary)))
    return TuneResult(sched, label, tuple(trials), result)
