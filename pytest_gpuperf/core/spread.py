"""The robust spread of a sample set (the median absolute deviation scaled to a normal sigma), the
standard error of a median, and how far a measurement's level moved while it ran."""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

#: 1 / Phi^-1(3/4): MAD times this estimates the standard deviation of normal samples.
MAD_TO_SIGMA = 1.4826
#: Relative standard error of the median of n normal samples: sqrt(pi/2) * sigma / sqrt(n).
MEDIAN_SE_FACTOR = 1.2533
#: Samples a measurement needs before its first and last quarters say how far its level moved.
SHIFT_MIN_SAMPLES = 20


def mad_sigma(samples: Sequence[float], center: float) -> float:
    """MAD_TO_SIGMA * the median absolute deviation of `samples` from `center`: a robust sd."""
    return MAD_TO_SIGMA * statistics.median(abs(x - center) for x in samples)


def relative_mad(samples: list[float], median: float | None = None) -> float:
    """MAD_TO_SIGMA * MAD / median (0 for a zero median): the `noise` of a result."""
    center = statistics.median(samples) if median is None else median
    return mad_sigma(samples, center) / center if center > 0 else 0.0


def level_shift(samples: Sequence[float], z: float) -> float | None:
    """How far a measurement's level moved while it ran: the median of the last quarter of its
    samples (positive, in the order taken) over that of the first quarter, minus 1. None with fewer
    than SHIFT_MIN_SAMPLES, or where the two medians' sampling error (z standard errors, from each
    quarter's own spread) explains the move."""
    if len(samples) < SHIFT_MIN_SAMPLES:
        return None
    quarter = len(samples) // 4
    first, last = samples[:quarter], samples[-quarter:]
    a, b = statistics.median(first), statistics.median(last)
    error = MEDIAN_SE_FACTOR * math.hypot(relative_mad(first, a), relative_mad(last, b)) / math.sqrt(quarter)
    shift = b / a - 1.0
    return shift if abs(shift) > z * error else None
