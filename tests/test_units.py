from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resilientcc.errors import InputError
from resilientcc.units import (
    as_fraction,
    format_size,
    format_time,
    parse_bandwidth,
    parse_size,
    parse_time,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1GiB", 2**30),
        ("256MiB", 256 * 2**20),
        ("4MB", 4 * 10**6),
        ("1.5KiB", 1536),
        ("1024", 1024),
        (" 2 GB ", 2 * 10**9),
        ("1/2GiB", None),
    ],
)
def test_parse_size(text, expected):
    if expected is None:
        with pytest.raises(InputError):
            parse_size(text)
    else:
        assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "0", "-1GiB", "1 parsec", "1e", "0B"])
def test_parse_size_rejects(bad):
    with pytest.raises(InputError, match="size"):
        parse_size(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("400Gbps", Fraction(50 * 10**9)),
        ("50GB/s", Fraction(50 * 10**9)),
        ("450 GB/s", Fraction(450 * 10**9)),
        ("100", Fraction(100)),
        ("1/3", Fraction(1, 3)),
    ],
)
def test_parse_bandwidth(text, expected):
    assert parse_bandwidth(text) == expected


@pytest.mark.parametrize("bad", ["-5Gbps", "0GB/s", "fast", "10 furlongs"])
def test_parse_bandwidth_rejects(bad):
    with pytest.raises(InputError):
        parse_bandwidth(bad)


def test_parse_time():
    assert parse_time("14us") == Fraction(14, 10**6)
    assert parse_time("3.4µs") == Fraction(34, 10**7)
    assert parse_time("0") == 0
    with pytest.raises(InputError):
        parse_time("-1s")


def test_as_fraction_is_decimal_exact():
    assert as_fraction(0.1) == Fraction(1, 10)
    assert as_fraction("2/3") == Fraction(2, 3)
    with pytest.raises(InputError):
        as_fraction(float("nan"))
    with pytest.raises(InputError):
        as_fraction(True)


@given(st.integers(min_value=1, max_value=2**50))
def test_size_roundtrip_bytes(n):
    assert parse_size(str(n)) == n


def test_formatting():
    assert format_size(2**30) == "1 GiB"
    assert format_time(0.0026843545) == "2.684 ms"
    assert format_time(14e-6) == "14 us"


def test_bits_and_bytes_are_distinguished():
    assert parse_bandwidth("400Gb/s") == parse_bandwidth("400Gbps") == Fraction(50 * 10**9)
    assert parse_bandwidth("400GB/s") == 8 * parse_bandwidth("400Gb/s")
    assert parse_bandwidth("100Mb/s") == Fraction(100 * 10**6, 8)
    with pytest.raises(InputError, match="bits"):
        parse_size("1Gb")


@pytest.mark.parametrize(
    ("parse", "text", "needle"),
    [
        (parse_size, "1e400", "too large"),
        (parse_size, "1048577TiB", "too large"),
        (parse_bandwidth, "1e400GB/s", "out of range"),
        (parse_bandwidth, "1e-400GB/s", "out of range"),
        (parse_bandwidth, "0.0001", "out of range"),
        (parse_time, "1e400s", "too long"),
    ],
)
def test_values_beyond_what_floats_carry_are_refused(parse, text, needle):
    """Sizes, bandwidths and times whose float would overflow or round to zero."""
    with pytest.raises(InputError, match=needle):
        parse(text, "--x")


def test_range_edges_are_accepted():
    assert parse_size(f"{2**60}") == 2**60
    assert parse_bandwidth("1e18") == 10**18
    assert parse_bandwidth("0.001") == Fraction(1, 1000)
    assert parse_time("1e6s") == 10**6


def test_generators_and_bounds_read_sizes_alike():
    """A size given as text, int, Fraction or float means the same to every entry point."""
    from resilientcc.bounds import lower_bound
    from resilientcc.schedules.generators import GENERATORS, generate
    from resilientcc.topology import hierarchical

    t = hierarchical(2, 2)
    for algo in GENERATORS:
        assert generate(algo, t, "1MiB") == generate(algo, t, Fraction(2**20))
        assert generate(algo, t, 1048576.0) == generate(algo, t, 2**20)
        with pytest.raises(InputError, match="cannot parse"):
            generate(algo, t, "lots")
    assert lower_bound(t, "1MiB").seconds == lower_bound(t, 2**20).seconds
