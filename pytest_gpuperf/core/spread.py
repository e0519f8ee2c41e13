"""The robust spread of a sample set (the median absolute deviation scaled to a normal sigma) and the
standard error of a median."""
from __future__ import annotations

import statistics
from collections.abc import Sequence

#: 1 / Phi^-1(3/4): MAD times this estimates the standard deviation of normal samples.
MAD_TO_SIGMA = 1.4826
#: Relative standard error of the median of n normal samples: sqrt(pi/2) * sigma / sqrt(n).
MEDIAN_SE_FACTOR = 1.2533


def mad_sigma(samples: Sequence[float], center: float) -> float:
    """MAD_TO_SIGMA * the median absolute deviation of `samples` from `center`: a robust sd."""
    return MAD_TO_SIGMA * statistics.median(abs(x - center) for x in samples)


def relative_mad(samples: list[float], median: float | None = None) -> float:
    """MAD_TO_SIGMA * MAD / median (0 for a zero median): the `noise` of a result."""
    center = statistics.median(samples) if median is None else median
    return mad_sigma(samples, center) / center if center > 0 else 0.0
