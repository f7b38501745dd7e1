"""Mutated schedule files (JSON and MSCCL XML) never crash the CLI: each run ends with a
verdict or a one-line error (exit 2), never a traceback."""

from __future__ import annotations

import copy
import json
import random
import xml.etree.ElementTree as ET
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from resilientcc.cli.app import app
from resilientcc.schedules.msccl import to_msccl_xml
from resilientcc.schedules.optcc import optcc
from resilientcc.schedules.serialize import schedule_to_dict
from resilientcc.topology import fail_nics, hierarchical

runner = CliRunner()
CLUSTER = ("-n", "2", "-g", "2", "--fail", "0:1")
JSON_VALUES: list[Any] = [None, -1, 0, 1, 10**30, 1.5, "x", "", [], {}, "1/0", "-1/2", True]
XML_VALUES = ["-1", "0", "1", "999999", "x", "", "1.5", "r", "rrc", "nop", "+zz", "1,2,x"]


@pytest.fixture(scope="module")
def schedule() -> Any:
    return optcc(fail_nics(hierarchical(2, 2), 0, 1), Fraction(2**20), pieces=2)


def _mutate_json(data: Any, rng: random.Random) -> Any:
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        parent, key, node = None, None, data
        while isinstance(node, (dict, list)) and node and (key is None or rng.random() < 0.6):
            parent = node
            key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
            node = node[key]
        if parent is None:
            continue
        if rng.random() < 0.75:
            parent[key] = rng.choice(JSON_VALUES)
        else:
            del parent[key]
    return data


def _mutate_xml(text: str, rng: random.Random) -> str:
    root = ET.fromstring(text)
    elements = list(root.iter())
    for _ in range(rng.randint(1, 3)):
        el = rng.choice(elements)
        if el.attrib:
            key = rng.choice(list(el.attrib))
            if rng.random() < 0.8:
                el.set(key, rng.choice(XML_VALUES))
            else:
                del el.attrib[key]
    out = ET.tostring(root, encoding="unicode")
    return out[: rng.randrange(len(out))] if rng.random() < 0.1 else out


def _check(args: list[str]) -> int:
    r = runner.invoke(app, args)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code in (0, 1, 2, 3), r.output
    if r.exit_code == 2:
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), r.output
    return int(r.exit_code)


@pytest.mark.parametrize("seed", range(3))
def test_mutated_files_end_in_a_verdict_or_one_line(schedule, tmp_path: Path, seed: int):
    rng = random.Random(seed)
    codes: list[int] = []
    base_json = schedule_to_dict(schedule)
    base_xml = to_msccl_xml(schedule)
    for i in range(15):
        js = tmp_path / f"m{i}.json"
        js.write_text(json.dumps(_mutate_json(base_json, rng)))
        xml = tmp_path / f"m{i}.xml"
        xml.write_text(_mutate_xml(base_xml, rng))
        for path in (js, xml):
            codes.append(_check(["sim", str(path), *CLUSTER, "--size", "1MiB"]))
            codes.append(_check(["verify", str(path)]))
    assert 2 in codes  # the mutants do reach the error paths
