"""core/units.py: counts in messages read '1 entry', '2 entries'."""
from __future__ import annotations

from pytest_gpuperf.core.units import plural


def test_plural_takes_the_singular_for_one_only():
    assert plural(1, "test") == "1 test"
    assert [plural(n, "test") for n in (0, 2)] == ["0 tests", "2 tests"]
    assert plural(1, "entry", "entries") == "1 entry" and plural(3, "entry", "entries") == "3 entries"
    assert plural(2, "process", "processes") == "2 processes"
