"""Order statistics of a sample set and a 95% confidence interval of its median that tolerates
correlated samples (judged from batch medians) and one disturbed batch."""
from __future__ import annotations

import math
import statistics

from ..core.records import UNBOUNDED, Interval, Statistics
from ..core.spread import relative_mad


#: Standard deviations of the other k - 1 batch medians by which the farthest one must lie from their
#: mean to count as one disturbed batch, for k = 5, 6, ... (beyond the table: its last value); normal
#: batches lose one ~1% of the time at every k.
DISTURBED_SIGMAS = (11.42, 8.25, 6.86, 6.10, 5.63, 5.31, 5.09, 4.92, 4.78, 4.68, 4.60, 4.53, 4.47, 4.42, 4.38,
                    4.34)
# Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom (beyond: 1.96 suffices).
_T975 = (12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13,
         2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04)


def _undisturbed(batch_medians: list[float]) -> list[float]:
    """The batch medians without one disturbed batch, if there is one among at least five: the one
    farthest from their median, when it lies further from the others' mean than DISTURBED_SIGMAS
    of their standard deviations (never when the others do not vary). A trend spreads over several
    batches and stays in the interval."""
    if len(batch_medians) < 5:
        return batch_medians
    center = statistics.median(batch_medians)
    far = max(range(len(batch_medians)), key=lambda i: abs(batch_medians[i] - center))
    rest = batch_medians[:far] + batch_medians[far + 1:]
    spread = statistics.stdev(rest)
    sigmas = DISTURBED_SIGMAS[min(len(batch_medians) - 5, len(DISTURBED_SIGMAS) - 1)]
    if spread > 0 and abs(batch_medians[far] - statistics.fmean(rest)) > sigmas * spread:
        return rest
    return batch_medians


def _ci_half_width(median: float, data: list[float], batch_medians: list[float] | None) -> float:
    """Half-width of a 95% CI of the median: from batch medians (t-interval; a lone disturbed batch
    left out, see _undisturbed) when there are enough batches, else distribution-free
    order-statistic bounds of the samples."""
    if batch_medians and len(batch_medians) >= 3:
        medians = _undisturbed(batch_medians)
        k = len(medians)
        t = _T975[k - 2] if k - 1 <= len(_T975) else 1.96
        return t * statistics.stdev(medians) / math.sqrt(k)
    n = len(data)
    half = 1.96 * math.sqrt(n) / 2
    lo = data[max(0, math.floor(n / 2 - half))]
    hi = data[min(n - 1, math.ceil(n / 2 + half))]
    return max(median - lo, hi - median)


def summarize(samples_ms: list[float], batch_medians: list[float] | None = None) -> Statistics:
    """The statistics of samples taken in this order: median, spread and a 95% CI of the median (see
    _ci_half_width)."""
    data = sorted(samples_ms)
    n = len(data)
    median = statistics.median(data)
    half = _ci_half_width(median, data, batch_medians) if n > 1 else None
    q1, _, q3 = statistics.quantiles(data, n=4) if n > 1 else (median, median, median)
    return Statistics(
        median_ms=median, mean_ms=statistics.fmean(data), min_ms=data[0], max_ms=data[-1],
        stddev_ms=statistics.stdev(data) if n > 1 else 0.0, q1_ms=q1, q3_ms=q3,
        noise=relative_mad(data, median), samples=n,
        ci_ms=Interval(median - half, median + half) if half is not None else UNBOUNDED,  # one sample: none
        data=tuple(samples_ms),
    )


def ci_relative(samples_ms: list[float], batch_medians: list[float] | None = None) -> float:
    """Half-width of the median's CI (summarize's) relative to the median, without the summary's other
    statistics: the stop rule asks after every batch, and their exact-arithmetic sums over thousands
    of samples took the host milliseconds while the device waited."""
    data = sorted(samples_ms)
    n = len(data)
    median = (data[(n - 1) // 2] + data[n // 2]) / 2
    if n < 2 or median <= 0:
        return math.inf
    return _ci_half_width(median, data, batch_medians) / median
