"""Human units for times, bytes, rates and percentages, and the one parser for '5%'-style values."""
from __future__ import annotations

import math
from typing import Any


def as_number(x: Any) -> float | None:
    """x as a finite float, or None for anything else (None, bools, strings, NaN, inf)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def positive_numbers(values: Any) -> list[float]:
    """The positive finite numbers of a stored list, as floats (anything but a list or tuple: none)."""
    if not isinstance(values, (list, tuple)):
        return []
    return [x for x in map(as_number, values) if x is not None and x > 0]


def parse_percent(text: Any) -> float:
    """'5%' -> 0.05, '12.5 %' -> 0.125, '0.05' or 0.05 -> 0.05 (plain numbers are fractions).

    ValueError when it is not a number (a bool is not one); range checks are the caller's."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a number")
    if isinstance(text, (int, float)):
        return float(text)
    s = str(text).strip()
    percent = s.endswith("%")
    if percent:
        s = s[:-1].strip()
    value = float(s)  # ValueError for anything else
    return value / 100.0 if percent else value


def fmt_ms(ms: float | None) -> str:
    """A time in ms in human units: 6.47 µs, 248.3 µs, 1.986 ms, 2.31 s."""
    if ms is None:
        return "-"
    us = ms * 1000.0
    if us < 10:
        return f"{us:.2f} µs"
    if us < 1000:
        return f"{us:.1f} µs"
    if ms < 1000:
        return f"{ms:.3f} ms"
    return f"{ms / 1000:.2f} s"


def fmt_bytes(n: float | None) -> str:
    """Bytes in binary units with 3 significant digits: 512 B, 12.0 MiB, 1.50 GiB."""
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            x = n / size
            return f"{x:.2f} {unit}" if abs(x) < 10 else f"{x:.1f} {unit}" if abs(x) < 100 else f"{x:.0f} {unit}"
    return f"{int(n)} B"


def fmt_change(x: Any) -> str:
    """A relative change as a signed percentage ('+3.2%'; never '-0.0%'); '' for no number."""
    x = as_number(x)
    return "" if x is None else f"{x * 100:+.1f}%".replace("-0.0%", "+0.0%")


def fmt_pct(x: Any, digits: int = 1) -> str:
    """A value already in percent ('87.5%'); '-' for no number."""
    x = as_number(x)
    return "-" if x is None else f"{x:.{digits}f}%"


def fmt_rate(x: Any) -> str:
    """A GB/s or TFLOP/s figure with about three significant digits; '-' for no number."""
    x = as_number(x)
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """'1 entry', '2 entries': a count and its noun, `nouns` (default `noun` + 's') unless it is 1."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"
