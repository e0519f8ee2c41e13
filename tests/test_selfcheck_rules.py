"""The precision self-check's rule for a GPU whose clock moved (perf_tests/test_harness.py), on the CPU:
it excuses runs the SM clock explains, and nothing else."""
from types import SimpleNamespace

import pytest

from perf_tests.test_harness import _clock_moved

# An H100's bf16 matmul 4096 under the power cap (2026-11-28): eight runs at 1650-1680 MHz.
CAPPED = [(1665, 192.66), (1657, 193.29), (1665, 193.83), (1650, 192.94), (1650, 193.00), (1665, 193.61),
          (1680, 192.90), (1672, 192.58)]


def _runs(pairs):
    return [SimpleNamespace(sm_clock_mhz=mhz, median_ms=us / 1e3) for mhz, us in pairs]


def test_runs_at_boost_that_the_clock_explains_are_the_gpus() -> None:
    why = _clock_moved(_runs(CAPPED + [(1965, 178.47), (1965, 174.63)]), 0.03, compute_bound=False)
    assert why and why.startswith("8 runs at 1650-1680 MHz spread 0.65%;")


# The same H100 warming under the cap: its clock fell 1695 -> 1635 MHz over the ten runs (3.22% in time).
WARMING = [(1695, 189.62), (1695, 189.04), (1665, 191.31), (1650, 192.72), (1665, 192.21), (1650, 193.78),
           (1650, 193.01), (1642, 194.55), (1635, 195.25), (1665, 193.46)]


def test_a_compute_bound_call_is_judged_at_one_clock() -> None:
    why = _clock_moved(_runs(WARMING), 0.03, compute_bound=True)
    assert why == "10 runs at 1635-1695 MHz spread 1.29% scaled to 1658 MHz"
    assert _clock_moved(_runs(WARMING), 0.03, compute_bound=False) is None  # a memory-bound call is not scaled


@pytest.mark.parametrize("pairs", [
    CAPPED + [(1965, 198.47), (1965, 174.63)],  # slower at a higher clock
    CAPPED + [(1965, 100.0), (1965, 174.63)],  # faster than the clock allows
    CAPPED[:6] + [(1965, 178.47)] * 4,  # fewer than seven runs at one clock
    CAPPED + [(1665, 178.47), (1965, 174.63)],  # a fast run at the common clock: the harness's spread
    CAPPED + [(None, 178.47), (1965, 174.63)],  # no clock reading
], ids=["wrong-direction", "beyond-clock", "too-few-at-one-clock", "noise-at-one-clock", "no-clock"])
def test_anything_else_is_not_excused(pairs) -> None:
    assert _clock_moved(_runs(pairs), 0.03, compute_bound=True) is None
