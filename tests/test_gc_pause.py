"""The generators, the schedule file I/O and the verifier pause the cyclic GC, and always
restore it."""

from __future__ import annotations

import gc
from fractions import Fraction

import pytest

from resilientcc._gc import gc_paused, paused_gc
from resilientcc.errors import InputError, ScheduleError
from resilientcc.schedules.generators import GENERATORS, get_generator
from resilientcc.schedules.serialize import load_schedule, save_schedule
from resilientcc.topology import fail_nics, hierarchical


@pytest.fixture(autouse=True)
def _gc_enabled_after():
    gc.enable()
    yield
    assert gc.isenabled(), "a test left the cyclic collector disabled"
    gc.enable()


def test_paused_restores_and_nests() -> None:
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves it as the outer set it
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # was off before: stays off
    finally:
        gc.enable()


def test_restored_after_an_exception() -> None:
    @gc_paused
    def boom() -> None:
        assert not gc.isenabled()
        raise InputError("bad")

    with pytest.raises(InputError):
        boom()
    assert gc.isenabled()
    assert boom.__name__ == "boom"


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generators_run_paused_and_restore(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    from resilientcc.schedules import executor

    real = executor.check

    def spy(s):  # the exact check runs inside the generator
        seen.append(gc.isenabled())
        return real(s)

    monkeypatch.setattr(executor, "check", spy)
    topo = fail_nics(hierarchical(2, 2, 2), 0, 1)
    s = get_generator(name)(topo, Fraction(2**20))
    assert s.transfers
    assert gc.isenabled()
    assert seen and not any(seen), f"{name}: the collector ran during generation"


def test_schedule_io_restores(tmp_path) -> None:
    topo = hierarchical(2, 2, 2)
    s = get_generator("ring")(topo, Fraction(2**20))
    save_schedule(s, tmp_path / "s.json")
    assert gc.isenabled()
    assert load_schedule(tmp_path / "s.json") == s
    assert gc.isenabled()
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ScheduleError):
        load_schedule(tmp_path / "bad.json")
    assert gc.isenabled()


def test_verify_runs_paused_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    from resilientcc.verify import api
    from resilientcc.verify.examples import ring_allreduce

    seen: list[bool] = []
    real = api.check_lossless

    def spy(*a, **k):
        seen.append(gc.isenabled())
        return real(*a, **k)

    monkeypatch.setattr(api, "check_lossless", spy)
    assert api.verify(ring_allreduce(4)).verdict == "proved"
    assert seen == [False] and gc.isenabled()
