"""The precision self-check's one-clock rule (perf_tests/test_harness.py), on the CPU: it excuses a
compute-bound call's runs that the SM clock explains, and nothing else."""
from types import SimpleNamespace

import pytest

from perf_tests.test_harness import _clock_moved

# An H100's bf16 matmul 4096 under the power cap (2026-11-28): eight runs at 1650-1680 MHz ...
CAPPED = [(1665, 192.66), (1657, 193.29), (1665, 193.83), (1650, 192.94), (1650, 193.00), (1665, 193.61),
          (1680, 192.90), (1672, 192.58)]
# ... two whole runs at boost clock, 7-10% faster (9.95% in all) ...
BOOST = [(1965, 178.47), (1965, 174.63)]
# ... and another process warming under the cap: 1695 -> 1635 MHz over ten runs (3.22% in time).
WARMING = [(1695, 189.62), (1695, 189.04), (1665, 191.31), (1650, 192.72), (1665, 192.21), (1650, 193.78),
           (1650, 193.01), (1642, 194.55), (1635, 195.25), (1665, 193.46)]


def _runs(pairs, throttle=()):
    return [SimpleNamespace(sm_clock_mhz=mhz, median_ms=us / 1e3, throttle=list(throttle)) for mhz, us in pairs]


def test_runs_at_boost_that_the_clock_explains_are_the_gpus() -> None:
    assert _clock_moved(_runs(CAPPED + BOOST), 0.03) == (
        "8 runs at 1650-1680 MHz spread 1.78% scaled to 1665 MHz; the other 2 ran at 1965 MHz (178.47 us), "
        "1965 MHz (174.63 us)")


def test_a_run_at_another_clock_that_did_not_move_is_harmless() -> None:
    assert _clock_moved(_runs(CAPPED + [(1965, 192.33), (1965, 174.63)]), 0.03)


def test_a_drift_the_clock_explains_is_the_gpus() -> None:
    assert _clock_moved(_runs(WARMING), 0.03) == "10 runs at 1635-1695 MHz spread 1.29% scaled to 1658 MHz"


@pytest.mark.parametrize("pairs", [
    CAPPED + [(1965, 201.50), (1965, 174.63)],  # slower at a higher clock, beyond the aim
    CAPPED + [(1965, 155.00), (1965, 174.63)],  # 19.5% faster where the clock predicts 15.3% (+3%)
    CAPPED[:6] + [(1965, 178.47)] * 4,  # fewer than seven runs at one clock
    CAPPED[:5] + [(1965, 178.47)] * 5,  # five and five: no clock holds seven
    CAPPED + [(1665, 178.47), (1965, 174.63)],  # a fast run at the common clock: the harness's spread
    CAPPED + [(None, 178.47), (1965, 174.63)],  # no clock reading
], ids=["wrong-direction", "beyond-clock", "too-few-at-one-clock", "split", "noise-at-one-clock",
        "no-clock"])
def test_anything_else_is_not_excused(pairs) -> None:
    assert _clock_moved(_runs(pairs), 0.03) is None


def test_a_thermal_slowdown_is_left_to_its_own_bounded_rule() -> None:
    assert _clock_moved(_runs(CAPPED + BOOST, throttle=["sw_power_cap", "hw_slowdown"]), 0.03) is None
