"""Parsing and printing of sizes, bandwidths and times.

Sizes and bandwidths are parsed to exact :class:`fractions.Fraction` values
(bytes and bytes per second) so that bounds stay exact.

>>> parse_size("1GiB")
Fraction(1073741824, 1)
>>> parse_bandwidth("400Gbps")
Fraction(50000000000, 1)
>>> format_time(0.0026843545)
'2.684 ms'
"""

from __future__ import annotations

import re
from fractions import Fraction

from resilientcc.errors import InputError

__all__ = [
    "MAX_BANDWIDTH",
    "MAX_SIZE",
    "MAX_TIME",
    "MIN_BANDWIDTH",
    "as_fraction",
    "check_bandwidth_range",
    "format_bandwidth",
    "format_size",
    "format_time",
    "parse_bandwidth",
    "parse_size",
    "parse_time",
]

#: the largest message size accepted, in bytes (1 EiB); beyond it times overflow floats
MAX_SIZE = Fraction(2**60)
#: the range of bandwidths accepted, in bytes/s (1 mB/s to 1 EB/s): outside it the
#: simulator's floats underflow to zero (a link that never drains) or overflow
MIN_BANDWIDTH = Fraction(1, 1000)
MAX_BANDWIDTH = Fraction(10**18)
#: the longest latency accepted, in seconds (about 11.6 days)
MAX_TIME = Fraction(10**6)

_SIZE_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
}

# bandwidth units -> bytes per second
_BW_UNITS: dict[str, Fraction] = {
    "b/s": Fraction(1),
    "kb/s": Fraction(10**3),
    "mb/s": Fraction(10**6),
    "gb/s": Fraction(10**9),
    "tb/s": Fraction(10**12),
    "gib/s": Fraction(2**30),
    "mib/s": Fraction(2**20),
    "bps": Fraction(1, 8),
    "kbps": Fraction(10**3, 8),
    "mbps": Fraction(10**6, 8),
    "gbps": Fraction(10**9, 8),
    "tbps": Fraction(10**12, 8),
    "gbit/s": Fraction(10**9, 8),
}

_TIME_UNITS: dict[str, Fraction] = {
    "s": Fraction(1),
    "ms": Fraction(1, 10**3),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),
    "ns": Fraction(1, 10**9),
}

_NUM = r"([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"


def as_fraction(value: object, what: str = "value") -> Fraction:
    """Convert an int, float, Fraction or numeric string to an exact Fraction.

    Floats are converted through their shortest decimal representation, so
    ``0.1`` becomes ``1/10`` rather than the binary approximation.
    """
    if isinstance(value, bool):
        raise InputError(f"{what}: expected a number, got {value!r}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"{what}: expected a finite number, got {value!r}")
        return Fraction(repr(value))
    if isinstance(value, str):
        try:
            return Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise InputError(f"{what}: {value!r} is not a number") from None
    raise InputError(f"{what}: expected a number, got {type(value).__name__}")


def _split(text: str, what: str, example: str) -> tuple[Fraction, str]:
    if re.fullmatch(r"\s*[0-9]+\s*/\s*[0-9]+\s*", text):  # exact rational, no unit
        try:
            return Fraction(text.replace(" ", "")), ""
        except ZeroDivisionError:
            raise InputError(f"{what}: {text!r} divides by zero") from None
    m = re.fullmatch(r"\s*" + _NUM + r"\s*([A-Za-zµ/]*)\s*", text)
    if not m:
        raise InputError(f"{what}: cannot parse {text!r} (expected e.g. {example})")
    return Fraction(m.group(1)), m.group(2)


def parse_size(text: str | int | Fraction, what: str = "size") -> Fraction:
    """Parse a message size such as ``"1GiB"``, ``"256MiB"``, ``"4MB"`` or ``1024`` (bytes).

    Raises :class:`InputError` for malformed, zero or negative sizes.
    """
    if isinstance(text, (int, Fraction)) and not isinstance(text, bool):
        value = Fraction(text)
    else:
        num, unit = _split(str(text), what, "'1GiB', '256MiB', '4MB'")
        key = unit.lower()
        if len(unit) >= 2 and unit.endswith("b") and not unit.endswith("ib"):
            raise InputError(
                f"{what}: {text!r} is in bits; sizes are in bytes (use {unit[:-1]}B or {unit[:-1]}iB)"
            )
        if key not in _SIZE_UNITS:
            raise InputError(
                f"{what}: unknown unit {unit!r} in {text!r} (use B, KiB, MiB, GiB, MB, GB)"
            )
        value = num * _SIZE_UNITS[key]
    if value <= 0:
        raise InputError(f"{what}: must be positive, got {text!r}")
    if value > MAX_SIZE:
        raise InputError(f"{what}: {text!r} is too large (at most 2**60 bytes, 1 EiB)")
    return value


def to_size(value: object, what: str = "size") -> Fraction:
    """A message size from an int, a Fraction, a finite float or a string like ``"1GiB"``.

    The same checks as :func:`parse_size` (positive, at most :data:`MAX_SIZE`); floats are
    read through their shortest decimal form, as :func:`as_fraction` does.

    >>> to_size("1GiB") == to_size(2**30) == to_size(1073741824.0)
    True
    """
    if isinstance(value, float):
        value = as_fraction(value, what)
    if isinstance(value, bool) or not isinstance(value, (str, int, Fraction)):
        raise InputError(f"{what}: expected bytes or a string like '1GiB', got {value!r}")
    return parse_size(value, what)


def parse_bandwidth(text: str | int | Fraction, what: str = "bandwidth") -> Fraction:
    """Parse a bandwidth such as ``"400Gbps"``, ``"50GB/s"`` or a plain number of bytes/s.

    Raises :class:`InputError` for malformed, zero or negative bandwidths.
    """
    if isinstance(text, (int, Fraction)) and not isinstance(text, bool):
        value = Fraction(text)
    else:
        num, unit = _split(str(text), what, "'400Gbps', '50GB/s'")
        key = unit.lower()
        if key == "":
            value = num
        elif key in _BW_UNITS:
            value = num * _BW_UNITS[key]
            if unit.endswith("b/s") and key.endswith("b/s") and not key.startswith("gib"):
                value /= 8  # lower-case b: bits per second (Gb/s), not bytes (GB/s)
        else:
            raise InputError(
                f"{what}: unknown unit {unit!r} in {text!r} (use Gbps, GB/s, MB/s, or bytes/s)"
            )
    if value <= 0:
        raise InputError(f"{what}: must be positive, got {text!r}")
    check_bandwidth_range(value, what, text)
    return value


def check_bandwidth_range(
    value: Fraction, what: str, text: object = None, error: type[InputError] = InputError
) -> None:
    """Raise ``error`` unless ``MIN_BANDWIDTH <= value <= MAX_BANDWIDTH`` (bytes/s)."""
    if not MIN_BANDWIDTH <= value <= MAX_BANDWIDTH:
        shown = repr(text) if text is not None else _short(value) + " B/s"
        raise error(f"{what}: {shown} is out of range (1e-3 B/s to 1e18 B/s, 1 EB/s)")


def _short(value: Fraction) -> str:
    """``value`` as text of at most about 20 characters (scientific beyond that)."""
    text = str(value)
    if len(text) <= 20:
        return text
    digits = len(str(abs(value.numerator))) - len(str(value.denominator))
    return f"~1e{digits}"


def parse_time(text: str | int | Fraction, what: str = "time") -> Fraction:
    """Parse a duration such as ``"14us"``, ``"3.4µs"`` or ``"0.001"`` (seconds); may be zero."""
    if isinstance(text, (int, Fraction)) and not isinstance(text, bool):
        value = Fraction(text)
    else:
        num, unit = _split(str(text), what, "'14us', '3.4µs', '0.001'")
        key = unit.lower() or "s"
        if key not in _TIME_UNITS:
            raise InputError(f"{what}: unknown unit {unit!r} in {text!r} (use s, ms, us, ns)")
        value = num * _TIME_UNITS[key]
    if value < 0:
        raise InputError(f"{what}: must not be negative, got {text!r}")
    if value > MAX_TIME:
        raise InputError(f"{what}: {text!r} is too long (at most 1e6 s)")
    return value


def format_size(nbytes: float | Fraction) -> str:
    """Human-readable size with binary prefixes, e.g. ``'1 GiB'``, ``'1.5 MiB'``."""
    x = float(nbytes)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(x) >= scale:
            return f"{x / scale:.4g} {unit}"
    return f"{x:.4g} B"


def format_bandwidth(bps: float | Fraction) -> str:
    """Human-readable bandwidth in GB/s (decimal), e.g. ``'50 GB/s'``."""
    x = float(bps)
    if abs(x) >= 1e9:
        return f"{x / 1e9:.4g} GB/s"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.4g} MB/s"
    return f"{x:.4g} B/s"


def format_time(seconds: float | Fraction) -> str:
    """Human-readable duration, e.g. ``'2.684 ms'``, ``'14 us'``."""
    x = float(seconds)
    ax = abs(x)
    if ax >= 1:
        return f"{x:.4g} s"
    if ax >= 1e-3:
        return f"{x * 1e3:.4g} ms"
    if ax >= 1e-6:
        return f"{x * 1e6:.4g} us"
    return f"{x * 1e9:.4g} ns"
