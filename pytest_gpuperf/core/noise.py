"""The gate's noise model: how far apart two sets of medians of one unchanged test may land.

Each side of a comparison is a list of medians, one per process (a baseline entry's recent
recordings, or the rounds of one side of an A/B run). The run-to-run spread of a test is learned
from those lists: the standard deviation of their logarithms, pooled with a prior for a test of that
duration (worth a few degrees of freedom, so one or two recordings cannot make a test look
quieter than tests of its kind are), and a Student-t quantile turns it into a bound on the change
that noise alone can explain. A baseline keeps only the last `HISTORY_WINDOW` recordings, so an
outlier recording widens a test's bound for a while, not forever. docs/gate.md shows the data the
constants come from.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .spread import MEDIAN_SE_FACTOR, mad_sigma

#: Recordings a baseline entry keeps; older ones drop out, and their spread with them.
HISTORY_WINDOW = 10


@dataclass(frozen=True)
class Prior:
    """The spread of a test's median between processes before its own recordings are known: a
    relative sd, an absolute part that dominates launch-bound calls, and its weight in degrees of
    freedom (as if that many extra recordings agreed with it)."""

    relative: float
    absolute_ms: float
    df: int
    #: The smallest change that ever counts: a test's threshold is at least this share of its median.
    min_change_ms: float
    #: How far short of the threshold a real change may fall and still count, as a share of it.
    margin_share: float = 0.0

    def sigma(self, median_ms: float) -> float:
        return math.hypot(self.relative, self.absolute_ms / median_ms) if median_ms > 0 else self.relative


#: Recordings on different machines of one GPU model (a baseline against a run): unchanged tests of
#: 20 µs or more on fresh H100s moved with a robust sd of 0.4-0.5%, with a tail of tests much further.
#: Calls of 5-20 µs that are latency-bound (several kernels, or a few blocks) moved by up to 1.16 µs
#: on an H100 of another host type, over 6 sd of their recordings (docs/gate.md). So the prior weighs
#: only a few recordings, its absolute part is 0.1 µs, and a change under 1.25 µs never counts.
ACROSS_MACHINES = Prior(relative=0.004, absolute_ms=0.0001, df=6, min_change_ms=0.00125)
#: Two sides measured in alternating processes on one machine (`gpuperf ab`): placement and clocks
#: still move between processes, but not the machine, and compiled code comes from one cache. Its
#: tails are light enough that a real change of 70% of the threshold counts (so a slowdown of exactly
#: the threshold is caught, not half the time); against a stored baseline a change must reach it.
SAME_MACHINE = Prior(relative=0.003, absolute_ms=0.00003, df=12, min_change_ms=0.00005, margin_share=0.3)
#: Host-clock timings (no CUDA: the `cpu` and `host-sync` methods) share the host's cores with
#: everything else on it: a 4x 512² float32 torch matmul loop read medians 10% apart (sd) across six
#: processes of one 2-core machine (docs/gate.md), two orders above a GPU's. Its own recordings
#: still widen it.
ON_HOST = Prior(relative=0.05, absolute_ms=0.001, df=6, min_change_ms=0.01)
#: One-sided confidence of the bound: with ~400 tests a run, 1e-3 keeps false alarms below one in a
#: few runs before the re-measurement and the margin rule (verdict.py) remove most of the rest.
CONFIDENCE = 0.999
#: A legacy (schema 1) entry's `drift`, the range of its medians over two or three recordings, read
#: as a standard deviation: range / d2 with d2 between 1.13 (two) and 1.69 (three recordings).
LEGACY_RANGE_TO_SD = 1 / 1.5
#: A legacy drift counts until the entry holds this many recordings of its own: from then on its own
#: spread says more than a range of two or three medians measured with older code.
LEGACY_UNTIL = 3


@dataclass(frozen=True)
class Spread:
    """The pooled run-to-run spread of one test: relative sd of one median, its degrees of freedom,
    and how many medians each side holds."""

    sigma: float
    df: float
    n_base: int
    n_now: int

    @property
    def quantile(self) -> float:
        return t_quantile(CONFIDENCE, self.df)

    def bound(self, extra_sd: float = 0.0) -> float:
        """The relative change (as a log ratio) that noise alone explains at `CONFIDENCE`;
        `extra_sd` adds a within-run standard error the spread does not already hold."""
        sd = math.sqrt(self.sigma ** 2 * (1.0 / self.n_base + 1.0 / self.n_now) + extra_sd ** 2)
        return self.quantile * sd


def log_spread(values: Sequence[float]) -> tuple[float, int]:
    """The sample sd of log(values) and its degrees of freedom (0 for fewer than two values)."""
    logs = [math.log(v) for v in values if v > 0]
    if len(logs) < 2:
        return 0.0, 0
    return statistics.stdev(logs), len(logs) - 1


def pooled_spread(base: Sequence[float], now: Sequence[float], prior: Prior = ACROSS_MACHINES, *,
                  legacy_sd: float | None = None, related: Sequence[float] = ()) -> Spread:
    """Pool each side's own spread with the prior (and a legacy entry's spread, as one degree of
    freedom) into one estimate of a median's run-to-run sd. `related`: other medians of the same
    test, not compared, whose spread pools in with its degrees of freedom (in an A/B run, a graph-timed
    test's recordings in the stored baseline)."""
    typical = statistics.median([*base, *now])
    sum_sq = prior.df * prior.sigma(typical) ** 2
    df = float(prior.df)
    for side in (base, now, related):
        s, side_df = log_spread(side)
        sum_sq += side_df * s * s
        df += side_df
    if legacy_sd:
        sum_sq += legacy_sd ** 2
        df += 1
    return Spread(math.sqrt(sum_sq / df), df, max(len(base), 1), max(len(now), 1))


def center(values: Sequence[float]) -> float:
    """A side's typical median: the geometric mean of its (positive) medians."""
    positive = [v for v in values if v > 0]
    return statistics.geometric_mean(positive) if positive else float("nan")


def t_quantile(p: float, df: float) -> float:
    """Student-t quantile (Hill's expansion around the normal quantile): 2.7% low at df 3, 0.3% at 5,
    0.14% at 6 (the fewest the priors allow), less beyond."""
    z = statistics.NormalDist().inv_cdf(p)
    if df == math.inf:
        return z
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4


def window(history: Sequence[float]) -> list[float]:
    """A baseline entry's recordings bounded to the last `HISTORY_WINDOW`."""
    return list(history)[-HISTORY_WINDOW:]


#: A process's common offset of graph-timed calls (`process_offsets`): how many reference tests it is
#: estimated from at least, how many of the side's rounds a test needs to be a reference, how many
#: standard errors from zero it must lie, and the least that counts (ms per call).
OFFSET_MIN_TESTS = 10
OFFSET_MIN_ROUNDS = 3
OFFSET_SIGNIFICANCE = 4.0
OFFSET_MIN_MS = 0.00005


def process_offsets(rounds: Sequence[dict[str, float]]) -> list[float]:
    """For one side's rounds (test id -> median ms per call of its graph-timed tests, one dict per
    process, in order), the ms per call by which each process read all of them above the side's
    typical process; 0.0 where that cannot be told from noise.

    Graph-timed calls of one process can all read the same amount per call above or below those of
    another process on the same machine (docs/gate.md). The reference of a test is its median over
    the side's rounds, so with three rounds the odd process stands out; a test must have
    OFFSET_MIN_ROUNDS rounds to count, and a process OFFSET_MIN_TESTS such tests. A change of the
    code under test moves every round of its side alike and so never shows as an offset. Where most
    of a side's processes are the odd ones, the offset goes to the others."""
    reference = {}
    for test in set().union(*rounds):
        values = [r[test] for r in rounds if test in r]
        if len(values) >= OFFSET_MIN_ROUNDS:
            reference[test] = statistics.median(values)
    offsets = []
    for measured in rounds:
        residuals = [measured[t] - ref for t, ref in reference.items() if t in measured]
        if len(residuals) < OFFSET_MIN_TESTS:
            offsets.append(0.0)
            continue
        mid = statistics.median(residuals)
        stderr = MEDIAN_SE_FACTOR * mad_sigma(residuals, mid) / math.sqrt(len(residuals))
        offsets.append(mid if abs(mid) > max(OFFSET_SIGNIFICANCE * stderr, OFFSET_MIN_MS) else 0.0)
    return offsets
