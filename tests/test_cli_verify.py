"""``rcc verify`` in-process (typer's CliRunner): exit codes 0/1/2/3, text and --json."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from resilientcc.cli.app import app
from resilientcc.schedules.ir import Transfer
from resilientcc.schedules.msccl import save_msccl
from resilientcc.schedules.serialize import save_schedule
from resilientcc.verify.examples import ring_allreduce

runner = CliRunner()


@pytest.fixture()
def good(tmp_path: Path) -> Path:
    path = tmp_path / "ring.json"
    save_schedule(ring_allreduce(4, 2), path)
    return path


@pytest.fixture()
def racy(tmp_path: Path) -> Path:
    s = ring_allreduce(4, 2)
    ts = list(s.transfers)
    ts[5] = dataclasses.replace(ts[5], deps=())
    path = tmp_path / "racy.json"
    save_schedule(dataclasses.replace(s, transfers=tuple(ts)), path)
    return path


def test_proved_exit_0(good: Path) -> None:
    r = runner.invoke(app, ["verify", str(good)])
    assert r.exit_code == 0, r.output
    assert "proved" in r.output and "lossless" in r.output


def test_failover_proved_and_no_dedup_violated(good: Path) -> None:
    r = runner.invoke(app, ["verify", str(good), "--failover"])
    assert r.exit_code == 0, r.output
    assert "failover_lossless" in r.output
    r = runner.invoke(app, ["verify", str(good), "--failover", "--no-dedup"])
    assert r.exit_code == 1, r.output
    assert "counted 2 times" in r.output and "delivered" in r.output and "#" in r.output
    r = runner.invoke(app, ["verify", str(good), "--failover", "--failures", "2", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["verdict"] == "proved"


def test_msccl_xml_files_are_verified(tmp_path: Path) -> None:
    """An MSCCL XML export is verified as the schedule it holds: proved as written, and a
    dependency taken out of its round-trip attributes is found as a race."""
    s = ring_allreduce(4, 2)
    good = tmp_path / "ring.xml"
    save_msccl(s, good)
    r = runner.invoke(app, ["verify", str(good)])
    assert r.exit_code == 0, r.output
    assert "proved" in r.output
    ts = list(s.transfers)
    ts[5] = dataclasses.replace(ts[5], deps=())
    racy = tmp_path / "racy.xml"
    save_msccl(dataclasses.replace(s, transfers=tuple(ts)), racy)
    r = runner.invoke(app, ["verify", str(racy), "--json"])
    assert r.exit_code == 1, r.output
    assert json.loads(r.output)["property"] == "race_free"


def test_violated_exit_1_with_json(racy: Path) -> None:
    r = runner.invoke(app, ["verify", str(racy), "--json"])
    assert r.exit_code == 1, r.output
    data = json.loads(r.output)
    assert data["verdict"] == "violated" and data["property"] == "race_free"
    assert {"verdict", "property", "counterexample", "seconds"} <= set(data)
    assert len(data["counterexample"]["transfers"]) == 2


def test_lossless_counterexample_text(tmp_path: Path) -> None:
    s = ring_allreduce(3)
    ts = (*s.transfers, Transfer(len(s.transfers), 0, 1, 0, "reduce", (len(s.transfers) - 1,)))
    path = tmp_path / "dup.json"
    save_schedule(dataclasses.replace(s, transfers=ts), path)
    r = runner.invoke(app, ["verify", str(path)])
    assert r.exit_code == 1
    assert "violated" in r.output


def test_unknown_exit_3(good: Path) -> None:
    r = runner.invoke(app, ["verify", str(good), "--timeout", "0.000000001", "--json"])
    assert r.exit_code == 3, r.output
    data = json.loads(r.output)
    assert data["verdict"] == "unknown" and data["counterexample"] is None


@pytest.mark.parametrize(
    "content", [None, "not json", '{"format": "other"}', '{"format": "resilientcc-schedule"}']
)
def test_bad_input_exit_2(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "s.json"
    if content is not None:
        path.write_text(content)
    r = runner.invoke(app, ["verify", str(path)])
    assert r.exit_code == 2
    assert "error:" in r.output
    assert "Traceback" not in r.output


def test_bad_options_exit_2(good: Path) -> None:
    assert runner.invoke(app, ["verify", str(good), "--failures", "3"]).exit_code == 2
    assert runner.invoke(app, ["verify", str(good), "--timeout", "-1"]).exit_code == 2


def test_large_schedules_report_each_check_on_stderr(
    good: Path, racy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From PROGRESS_TRANSFERS transfers each property is announced and its verdict and
    time printed on stderr; stdout (and --json) is unchanged; smaller files stay quiet."""
    import resilientcc.cli.verify as cli_verify

    quiet = runner.invoke(app, ["verify", str(good), "--json"])
    assert quiet.stderr == ""
    monkeypatch.setattr(cli_verify, "PROGRESS_TRANSFERS", 1)
    r = runner.invoke(app, ["verify", str(good), "--json"])
    assert r.exit_code == 0

    def verdicts(out: str) -> list[tuple[str, str]]:
        d = json.loads(out)
        return [("all", d["verdict"])] + [(x["property"], x["verdict"]) for x in d["results"]]

    assert verdicts(r.stdout) == verdicts(quiet.stdout)
    lines = r.stderr.splitlines()
    props = [ln.split()[1] for ln in lines if ln.startswith("checking ")]
    assert props == ["deadlock_free", "race_free", "lossless"]
    assert sum("proved in" in ln for ln in lines) == 3
    r = runner.invoke(app, ["verify", str(racy)])
    assert r.exit_code == 1
    assert "violated in" in r.stderr  # stops at the violated property
