"""The robust spread of a sample set: the median absolute deviation scaled to a normal sigma."""
from __future__ import annotations

import statistics

#: 1 / Phi^-1(3/4): MAD times this estimates the standard deviation of normal samples.
MAD_TO_SIGMA = 1.4826


def relative_mad(samples: list[float], median: float | None = None) -> float:
    """MAD_TO_SIGMA * MAD / median (0 for a zero median): the `noise` of a result."""
    center = statistics.median(samples) if median is None else median
    mad = statistics.median(abs(x - center) for x in samples)
    return MAD_TO_SIGMA * mad / center if center > 0 else 0.0
