"""``rcc synth`` and ``rcc report`` in-process (typer's CliRunner)."""

from __future__ import annotations

import json
import types
from fractions import Fraction

import pytest
from msccl_interp import run_msccl
from typer.testing import CliRunner

from resilientcc import report as report_lib
from resilientcc.cli.app import app
from resilientcc.schedules.msccl import load_msccl
from resilientcc.schedules.serialize import load_schedule

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def test_synth_json_and_msccl(tmp_path):
    out = tmp_path / "s.json"
    r = run(
        "synth", "optcc", "-n", "2", "-g", "4", "--fail", "0:2", "--size", "64MiB", "-o", str(out)
    )
    assert r.exit_code == 0, r.output
    s = load_schedule(out)
    assert s.name == "optcc" and s.ranks == 8
    xml = tmp_path / "s.xml"
    r = run("synth", "hierarchical", "-n", "2", "-g", "4", "-o", str(xml), "--format", "msccl-xml")
    assert r.exit_code == 0, r.output
    assert load_msccl(xml).name == "hierarchical"
    # a schedule file is checked against the cluster and converted
    r = run(
        "synth",
        str(out),
        "-n",
        "2",
        "-g",
        "4",
        "--fail",
        "0:2",
        "-o",
        str(tmp_path / "c.xml"),
        "-f",
        "msccl-xml",
    )
    assert r.exit_code == 0, r.output
    assert load_msccl(tmp_path / "c.xml") == load_schedule(out)


def test_synth_msccl_fits_the_pipeline_depth(tmp_path):
    """OptCC's default depth does not fit the MSCCL executor on 2 × 8 GPUs: rcc synth
    exports the deepest that does and says so; a depth asked for is kept, or refused."""
    xml = tmp_path / "o.xml"
    args = ("synth", "optcc", "-n", "2", "--fail", "0:4", "-f", "msccl-xml", "-o", str(xml))
    r = run(*args)
    assert r.exit_code == 0, r.output
    pieces = load_msccl(xml).meta_get("pieces")
    assert pieces is not None and f"optcc: {pieces} pieces, not the default 64" in r.stderr
    xml.unlink()
    r = run(*args, "-O", "pieces=64")
    assert r.exit_code == 2 and "steps, more than 256" in r.stderr
    assert not xml.exists()


def test_synth_msccl_writes_optcc_without_trees_where_they_do_not_fit(tmp_path):
    """On 2 × 4 GPUs with two NICs each OptCC packs trees (no layered schedule runs
    there), whose lanes need far more than the executor's 32 channels: the MSCCL export
    writes the variant its rules give without the trees, says why, and it runs; the
    JSON keeps the trees. Asked for with ``-O trees=true`` the export is refused."""
    base = ("synth", "optcc", "-n", "2", "-g", "4", "--nics-per-server", "2", "-s", "16MiB")
    js, xml = tmp_path / "t.json", tmp_path / "t.xml"
    assert run(*base, "-o", str(js)).exit_code == 0
    assert load_schedule(js).meta_get("variant") == "tree packing"
    r = run(*base, "-f", "msccl-xml", "-o", str(xml))
    assert r.exit_code == 0, r.output
    assert "the tree packing does not fit (channels 0.." in r.stderr
    assert "32 channels); wrote the ring (no degraded server) variant instead" in r.stderr
    s = load_msccl(xml)
    assert s.meta_get("variant") == "ring (no degraded server)"
    out = run_msccl(xml.read_text())
    assert not out.deadlocked and out.allreduce
    xml.unlink()
    # tuned, the trees are kept; the export writes the fastest other variant tried
    r = run(*base, "--tune", "-f", "msccl-xml", "-o", str(xml))
    assert r.exit_code == 0, r.output
    assert "-> rules" in r.stderr and "the tree packing does not fit" in r.stderr
    assert "wrote the ordered rings variant instead" in r.stderr
    assert load_msccl(xml).meta_get("variant") == "ordered rings"
    xml.unlink()
    r = run(*base, "-O", "trees=true", "-f", "msccl-xml", "-o", str(xml))
    assert r.exit_code == 2 and "exceed the executor's 32 channels" in r.stderr
    assert not xml.exists() and "Traceback" not in r.output


def test_synth_msccl_rounds_splits_too_fine(tmp_path):
    """Balance with one NIC at 0.3713 of its bandwidth splits the buffer into chunks whose
    common denominator is far beyond the executor's 65,536 chunks per loop: rcc synth
    rounds them, says by how much, and the program still runs as an AllReduce."""
    xml = tmp_path / "b.xml"
    r = run(
        "synth", "balance", "-n", "3", "-g", "4", "--fail", "0:nic1x0.3713",
        "-f", "msccl-xml", "-o", str(xml),
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "chunk splits rounded to 1/" in r.stderr and "of a chunk" in r.stderr
    s = load_msccl(xml)
    units = s.meta_get("chunks_rounded_to")
    assert units is not None and all((c.size * int(units)).denominator == 1 for c in s.chunks)
    out = run_msccl(xml.read_text())
    assert not out.deadlocked and out.allreduce


@pytest.mark.parametrize(
    "args,needle",
    [
        (["synth", "nope", "-o", "X"], "unknown algorithm"),
        (["synth", "optcc", "--size", "0", "-o", "X"], "--size"),
        (["synth", "optcc", "--size", "12 parsecs", "-o", "X"], "--size"),
        (["synth", "optcc", "-f", "yaml", "-o", "X"], "--format"),
        (["synth", "optcc", "-n", "2", "--fail", "9:1", "-o", "X"], "server"),
        (["report", "--servers", "1", "--out", "X"], "--servers"),
        (["report", "--lost", "8", "--out", "X"], "--lost"),
        (["synth", "ring", "-n", "2", "-o", "MISSING"], "--output: cannot write"),
        (["synth", "ring", "-n", "2", "-o", "DIR"], "--output: "),
        (["synth", "ring", "-n", "2", "--size", "1e400", "-o", "X"], "too large"),
        (["report", "--quick", "--out", "FILE"], "--out: "),
        (["report", "--quick", "--out", "UNDERFILE"], "--out: cannot create"),
        (["report", "--sizes", ",,", "--out", "X"], "--sizes: empty list"),
        (["report", "--sizes", "1GiB,,2", "--out", "X"], "--sizes: an empty entry"),
        (["report", "--sizes", "1.5B", "--out", "X"], "not a whole number of bytes"),
        (["report", "--servers", "4,,8", "--out", "X"], "--servers: an empty entry"),
        (["synth", "ring", "-n", "1000", "-g", "1000", "-o", "X"], "more than 131,072"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle, tmp_path):
    (tmp_path / "file").write_text("")
    places = {
        "X": tmp_path / "o.json",
        "MISSING": tmp_path / "no" / "o.json",
        "DIR": tmp_path,
        "FILE": tmp_path / "file",
        "UNDERFILE": tmp_path / "file" / "sub",
    }
    args = [str(places[a]) if a in places else a for a in args]
    r = run(*args)
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0]


def test_bad_schedule_files_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = run("synth", str(bad), "-o", str(tmp_path / "o.json"))
    assert r.exit_code == 2 and "not valid JSON" in r.output
    good = tmp_path / "g.json"
    assert run("synth", "ring", "-n", "2", "-g", "2", "-o", str(good)).exit_code == 0
    r = run("synth", str(good), "-n", "3", "-g", "2", "-o", str(tmp_path / "o.json"))
    assert r.exit_code == 2 and "another topology" in r.output
    data = json.loads(good.read_text())
    data["transfers"] = data["transfers"][:-1]  # no longer an AllReduce
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(data))
    r = run("synth", str(broken), "-n", "2", "-g", "2", "-o", str(tmp_path / "o.json"))
    assert r.exit_code == 2 and "not a correct AllReduce" in r.output


@pytest.mark.parametrize(
    "args",
    [
        ("sim", "BIN.json"),
        ("sim", "BIN.xml"),
        ("sim", "ring", "--topology", "BIN.json"),
        ("verify", "BIN.json"),
        ("synth", "BIN.json", "-o", "OUT"),
    ],
)
def test_binary_files_exit_2(tmp_path, args):
    """A file that is not UTF-8 text is named in a one-line error, not a traceback."""
    for name in ("BIN.json", "BIN.xml"):
        (tmp_path / name).write_bytes(b"\xff\xfe\x00binary")
    args = [str(tmp_path / a) if a.startswith(("BIN", "OUT")) else a for a in args]
    r = run(*args)
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "not UTF-8 text" in lines[0] and "BIN" in lines[0]
    assert not (tmp_path / "OUT").exists()


@pytest.mark.parametrize("verdict,code", [("proved", 0), ("violated", 1), ("unknown", 3)])
def test_synth_verify_exit_codes(verdict, code, tmp_path, monkeypatch):
    import sys

    fake = types.ModuleType("resilientcc.verify")
    fake.verify = lambda s, **kw: types.SimpleNamespace(verdict=verdict, property="lossless")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "resilientcc.verify", fake)
    r = run("synth", "ring", "-n", "2", "-g", "2", "-o", str(tmp_path / "o.json"), "--verify")
    assert r.exit_code == code, r.output
    assert f"verify: {verdict}" in r.output


def fake_rows():
    rows = []
    for n in (4, 8):
        for k in (1, 2, 4):
            times = {"ring": 2e-3, "balance": 1.5e-3, "r2cc_allreduce": 1.4e-3, "optcc": 1.1e-3}
            lat = {a: 0.1e-3 for a in times}
            rows.append(
                report_lib.Row(n, k, 2**30, (8 - k) / 8, 1e-3, 1.05e-3, 1.0e-3, 0.9e-3, times, lat)
            )
    return rows


def test_report_writes_table_and_plot(tmp_path, monkeypatch):
    calls = {}

    def fake_flagship(servers, lost, sizes, **kw):
        calls["args"] = (servers, lost, sizes)
        kw["progress"]("working")
        return fake_rows()

    monkeypatch.setattr(report_lib, "flagship", fake_flagship)
    r = run("report", "--out", str(tmp_path / "rep"), "--quick")
    assert r.exit_code == 0, r.output
    assert calls["args"] == ([4], [1, 2, 4], [2**30])
    assert (tmp_path / "rep" / "overhead.png").stat().st_size > 1000
    table = json.loads((tmp_path / "rep" / "table.json").read_text())
    assert len(table) == 6 and table[0]["times_s"]["optcc"] == 1.1e-3
    assert "optcc/ff ring" in (tmp_path / "rep" / "table.md").read_text()
    assert "| 4 | 1/8 | 1024 MiB |" in r.output
    headline = (tmp_path / "rep" / "headline.md").read_text()
    assert headline in r.output and "| 4 × 8 GPUs | 1 of 8 | 1 GiB |" in headline


def test_markdown_ratios():
    md = report_lib.rows_to_markdown(fake_rows()[:1])
    assert "1.048" in md  # optcc 1.1 / ff ring 1.05
    assert "1.100" in md  # optcc / bound
    assert "| 0.100 | 1.000 |" in md  # optcc latency part, (1.1 − 0.1) / bound


def test_flagship_uses_cache(monkeypatch):
    jobs = []

    def fake_sim(job):
        jobs.append(job)
        return job, 1e-3, 2e-5, 9e-4

    monkeypatch.setattr(report_lib, "_simulate", fake_sim)
    monkeypatch.setattr(report_lib, "_bounds", lambda n, k, size: (1e-3, 1e-3, 1e-3, 1.1e-3))
    # a cached time without its latency part or its floor is simulated again
    cache = {
        "ring/2/0/1024": 5e-4,
        "ring/2/0/1024/latency": 1e-5,
        "ring/2/0/1024/floor": 4e-4,
        "ring/2/4/1024": 7e-4,
        "optcc/2/4/1024": 7e-4,
        "optcc/2/4/1024/latency": 1e-5,
    }
    rows = report_lib.flagship([2], [4], [1024], ["ring", "optcc"], workers=1, cache=cache)
    assert ("ring", 2, 0, 1024) not in jobs and len(jobs) == 2
    assert rows[0].fault_free_ring_s == 5e-4 and "optcc/2/4/1024" in cache
    assert cache["optcc/2/4/1024/latency"] == 2e-5 and rows[0].latency_s["ring"] == 2e-5
    assert cache["optcc/2/4/1024/floor"] == 9e-4 and rows[0].floor_s["optcc"] == 9e-4
    assert rows[0].times_s["ring"] == 1e-3
    assert Fraction(rows[0].beta).limit_denominator(8) == Fraction(1, 2)


@pytest.mark.parametrize("algo", ["hierarchical", "r2cc_allreduce", "optcc"])
def test_synth_verify_proves_my_generators(algo, tmp_path):
    verify = pytest.importorskip("resilientcc.verify")
    if not hasattr(verify, "verify"):
        pytest.skip("verifier not available")
    r = run(
        "synth",
        algo,
        "-n",
        "3",
        "-g",
        "2",
        "--fail",
        "0:1",
        "--size",
        "1MiB",
        "-o",
        str(tmp_path / "s.json"),
        "--verify",
    )
    assert r.exit_code == 0, r.output
    assert "verify: proved" in r.output


def test_file_cache_leaves_out_what_is_not_a_time(tmp_path):
    """A cache edited by hand or cut short: entries that are not finite non-negative
    numbers are dropped (and simulated again), the rest kept; a broken file is empty."""
    path = tmp_path / "cache.json"
    path.write_text(json.dumps({"a": 0.5, "b": "x", "c": True, "d": -1, "e": 2, "f": None}))
    cache = report_lib.FileCache(path)
    assert dict(cache) == {"a": 0.5, "e": 2.0} and cache.skipped == 4
    path.write_text("{cut")
    assert dict(report_lib.FileCache(path)) == {}
    path.write_text("[1, 2]")
    assert dict(report_lib.FileCache(path)) == {}


def test_synth_verify_reports_progress_on_large_schedules(tmp_path, monkeypatch):
    import resilientcc.cli.verify as cli_verify

    monkeypatch.setattr(cli_verify, "PROGRESS_TRANSFERS", 1)
    r = run("synth", "ring", "-n", "2", "-g", "2", "-o", str(tmp_path / "o.json"), "--verify")
    assert r.exit_code == 0, r.output
    assert "checking lossless over 48 transfers..." in r.stderr
    assert "verify: proved" in r.stdout


def test_tree_packing_is_announced(capsys):
    """Packing trees takes seconds on a few dozen GPUs: rcc says so before it starts, for
    OptCC where its rules pack them, not where they do not or for a ring."""
    from resilientcc.cli.sim_report import announce_generation
    from resilientcc.topology import hierarchical

    few_nics = hierarchical(4, 8, nics_per_server=2)
    assert announce_generation("optcc", few_nics, Fraction(2**26), {})
    assert "generating optcc on 32 GPUs (packing reduce and broadcast trees" in (
        capsys.readouterr().err
    )
    assert not announce_generation("optcc", few_nics, Fraction(2**26), {"trees": False})
    assert not announce_generation("optcc", hierarchical(4, 8), Fraction(2**26), {})
    assert not announce_generation("ring", few_nics, Fraction(2**26), {})
    assert capsys.readouterr().err == ""
