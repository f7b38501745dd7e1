import json
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resilientcc.errors import ScheduleError
from resilientcc.schedules import (
    Schedule,
    Transfer,
    chunks_from_sizes,
    load_schedule,
    save_schedule,
    schedule_from_dict,
    schedule_to_dict,
)


def _sched(sizes, route=None):
    ts = (
        Transfer(0, 0, 1, 0, "reduce", (), 2, route),
        Transfer(1, 1, 0, 0, "copy", (0,), 1),
    )
    return Schedule("pair", 2, Fraction(3, 1), chunks_from_sizes(sizes), ts, meta=(("k", "v"),))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 1000), min_size=1, max_size=6))
def test_json_roundtrip_exact(weights):
    total = sum(weights)
    sizes = [Fraction(w, total) for w in weights]
    s = _sched(sizes, route=("a", "b"))
    back = schedule_from_dict(json.loads(json.dumps(schedule_to_dict(s))))
    assert back == s


def test_file_roundtrip(tmp_path):
    s = _sched([Fraction(1, 3), Fraction(2, 3)])
    p = tmp_path / "s.json"
    save_schedule(s, p)
    assert load_schedule(p) == s


@pytest.mark.parametrize(
    ("text", "msg"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "top level"),
        ('{"format": "other"}', "format"),
        ('{"version": 1}', "no 'format' entry"),
        ('{"format": "resilientcc-schedule", "version": 1, "name": "x"}', "missing"),
    ],
)
def test_malformed_files(tmp_path, text, msg):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(ScheduleError, match=msg):
        load_schedule(p)


def test_bad_transfer_row_names_its_index():
    d = schedule_to_dict(_sched([Fraction(1)]))
    d["transfers"][1] = [1, 1, 0]
    with pytest.raises(ScheduleError, match=r"transfers\[1\]"):
        schedule_from_dict(d)


def test_chunk_sizes_must_sum_to_one():
    d = schedule_to_dict(_sched([Fraction(1)]))
    d["chunks"] = [["0", "1/2"]]
    with pytest.raises(ScheduleError, match="sum to"):
        schedule_from_dict(d)
