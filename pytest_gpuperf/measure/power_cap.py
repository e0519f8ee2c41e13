"""The power cap's rules for the timer (cuda_timer.py): how long a call the cap holds down is warmed
up, and how its samples keep the device busy while the host reads them (docs/measurement.md,
"Power cap")."""
from __future__ import annotations

from .device import ClockState

#: Warm-up added once the power cap holds a call's clock down, at most: on an H100 a full queue of
#: bf16 matmuls ran at boost clock until the cap brought the clock down 0.13-1.2 s in, and 1 s runs
#: read 5% apart by whether they sampled before it (docs/measurement.md, "Power cap").
POWER_CAP_WARMUP_S = 1.0
#: ... It ends sooner once the cap has settled: after at least POWER_CAP_MIN_S, the last
#: POWER_CAP_READS clock readings, one every POWER_CAP_STEP_S, all held down by the cap and within
#: POWER_CAP_SETTLED_MHZ of each other (two of the SM clock's 15 MHz steps).
POWER_CAP_MIN_S = 0.25
POWER_CAP_STEP_S = 0.05
POWER_CAP_READS = 4
POWER_CAP_SETTLED_MHZ = 30
#: ... or once the clock runs where the baseline's samples ran: after POWER_CAP_MIN_S, the last
#: POWER_CAP_READS readings within POWER_CAP_SETTLED_MHZ of each other and of the baseline's clock.
#: Both sides are then sampled at one clock, which is what the longer warm-up waits for; a cap that
#: engages later lowers this side's clock, which the verdict's clock rule reads.
#: ... and sooner still for a call whose baseline the cap held but which the cap does not hold now,
#: where the cap is far off: after POWER_CAP_MIN_S, the last POWER_CAP_READS readings not held down
#: and drawing under this share of the enforced power limit. The cap acts on a running average of
#: the draw, so a load it is about to hold already draws near the limit.
POWER_CLEAR_SHARE = 0.8
#: Calls of over 10 ms (the timer's long calls) queued at most this many at a time in that warm-up,
#: so it ends within that many calls of its bound and its readings see a busy device.
POWER_CAP_AHEAD = 2
#: Device time queued after each batch of a call sampled unbroken while the host reads it: at least
#: FILL_FIRST_MS, and FILL_FACTOR times the longest of the last FILL_GAPS host gaps between batches
#: (1.7 ms on an H100 host). Idle between batches raised an H100's capped clock from ~1400 to
#: 1700-1965 MHz, and its bf16 matmul read 10% under an unbroken loop.
FILL_FIRST_MS = 5.0
FILL_FACTOR = 2.0
FILL_GAPS = 3


def cap_clear(readings: list[ClockState], shares: list[float | None]) -> bool:
    """Is the power cap far off? The last POWER_CAP_READS readings are not held down and drew under
    POWER_CLEAR_SHARE of the power limit (`shares`, device.power_share; None: unknown, never clear)."""
    last, drawn = readings[-POWER_CAP_READS:], shares[-POWER_CAP_READS:]
    return (len(drawn) == POWER_CAP_READS and not any(r.power_limited for r in last)
            and all(share is not None and share < POWER_CLEAR_SHARE for share in drawn))


def cap_settled(readings: list[ClockState]) -> bool:
    """Has the power cap settled a call's clock? The last POWER_CAP_READS readings are all held down
    by the cap and within POWER_CAP_SETTLED_MHZ of each other."""
    last = readings[-POWER_CAP_READS:]
    clocks = [r.sm_clock_mhz for r in last if r.power_limited and r.sm_clock_mhz]
    return len(clocks) == POWER_CAP_READS and max(clocks) - min(clocks) <= POWER_CAP_SETTLED_MHZ


def clock_matched(readings: list[ClockState], baseline_mhz: int | None) -> bool:
    """Does the clock run where the baseline's samples ran? The last POWER_CAP_READS readings lie
    within POWER_CAP_SETTLED_MHZ of each other and of `baseline_mhz` (None: unknown, never)."""
    clocks = [r.sm_clock_mhz for r in readings[-POWER_CAP_READS:] if r.sm_clock_mhz]
    if not baseline_mhz or len(clocks) < POWER_CAP_READS:
        return False
    return max(clocks + [baseline_mhz]) - min(clocks + [baseline_mhz]) <= POWER_CAP_SETTLED_MHZ
