"""The regression decision, shared by the pytest plugin, `gpuperf compare` and `gpuperf ab`.

Each side is one or more medians of the test, one per process: a baseline entry's recent recordings
(`history`), this run's median, or the rounds of one side of an A/B run. The change is the ratio of
the two sides' centers; the noise bound is the change that the test's run-to-run spread (learned from
both sides' medians with a prior, `core.noise`) and this run's own sampling error can explain. A
test's threshold is at least the prior's smallest meaningful change over its median (1.25 µs against
a stored baseline, 0.05 µs in an A/B run), so a kernel of a few microseconds is held to a change it
can show.

Verdicts (for time; memory uses the same words):
  slower   change > noise_bound and change + min(noise_bound, margin * threshold) >= threshold: the
           slowdown is real and could be threshold-sized. Against a stored baseline the margin is 0
           (the change must reach the threshold: machines differ by heavy tails); in an A/B run it is
           the prior's 30%, so a slowdown of exactly the threshold is caught, not half the time.
  faster   the same, mirrored
  unsure   |change| > threshold but within the noise bound, or the noise bound itself exceeds the
           threshold (a threshold-sized slowdown could not have been seen)
  same     otherwise
  new      no baseline entry;  missing: a baseline entry that was not run
A side sampled in an unbroken loop because the power cap held its clock down (`loaded`) is at most
unsure against one that was not: the harness's pauses, not the code, set the other side's clock.
A run slowed by a thermal or hardware slowdown (SEVERE_THROTTLE) that its baseline did not show is
not judged slower either, where its lower SM clock explains the change (its time scaled by the
clock ratio would not be slower): the GPU, not the code, ran slow. So is a `loaded` run against a
`loaded` baseline whose power cap held its clock lower (an H200 host of four busy GPUs capped a GeLU
at 1620 MHz, its baseline's recordings at 1860: +5.6%); its counters decide it. It is re-measured, as any
suspect, in case the GPU has cooled. Mirrored, a change that the baseline's lower clock explains is
not judged faster (nor re-measured: this run is not the side that ran slow), and its counters decide
it as they do a slowdown's (more work fails); in an A/B run either side can be the one held down
(identical revisions on an H200 read a cuBLAS matmul 4.0% faster, the base's rounds capped at
1395-1410 MHz, the head's at 1575-1935).
A graph-timed side whose process replayed graphs slower than a fresh process (`slow_replay_us`, after
large kernels: measure/replay_state.py) is likewise not judged slower or faster than the other side
where REPLAY_CHARGE times the difference per call explains the change.
Where this run's own samples moved, from their first quarter's median to their last's, by at least
SHIFT_SHARE of a slower or faster change and in its direction (beyond their sampling error), the
message says so: the call's speed changed while it was measured, so the run is worth repeating. The
verdict word stays.
The noise bound is also each test's smallest detectable change, which the reports show.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from . import noise
from .counters import LESS, MORE, OTHER, CounterVerdict, judge_counters
from .noise import ACROSS_MACHINES, ON_HOST, Prior
from .records import SEVERE_THROTTLE, Judgement, Measured, Method, Result
from .spread import MEDIAN_SE_FACTOR, level_shift
from .units import as_number, fmt_bytes, fmt_change, fmt_ms, parse_percent, positive_numbers

T = TypeVar("T")

# ---- tunables, guarded by the gate self-checks (perf_tests/test_gate_quality.py)
#: z-score of the two-sided 95% interval, used when a record has no measured "ci_ms".
Z = 1.96
#: Peak-memory changes smaller than this many bytes are never a verdict (allocator rounding, workspaces).
MEMORY_ABS_FLOOR = 1 << 20
#: The default slowdown that counts as a regression.
DEFAULT_THRESHOLD = 0.05
#: µs per call a graph-timed median reads high per µs per node of the replay probe's excess
#: (`slow_replay_us`): on an H100 the suite's single-kernel graph-timed tests read 0.28-0.41 µs
#: (10th-90th percentile, at most 0.58) higher in a process whose probe read 0.18 above a fresh one
#: (docs/measurement.md, "Replay state") ...
REPLAY_CHARGE = 3.0
#: ... and each further kernel of a call this much more: on an H200 calls of 6-10 kernels read
#: 0.33 µs a kernel higher at a probe 0.18 above a fresh one (docs/gate.md). Kernels are counted
#: launches (graph_nodes); a call without counts on either side is charged as one kernel.
REPLAY_CHARGE_FURTHER = 2.0
#: Share of a slower or faster change that the run's samples must have moved by, in its direction,
#: for the message to name the move: a power-capped cuDNN attention forward on an H100 read `faster`
#: by 6.5%, its samples' first quarter at 593.8 µs and last at 563.3 (docs/gate.md).
SHIFT_SHARE = 0.5

VERDICTS = ("faster", "same", "slower", "unsure", "new", "missing")
#: The verdicts that claim a change.
CHANGES = ("slower", "faster")
#: Methods that time with the host's clock: judged with noise.ON_HOST.
HOST_METHODS = frozenset({Method.CPU.value, Method.HOST_SYNC.value})


def asked_threshold(record: Measured) -> float:
    """The threshold a test asked for: its marker's or the pytest arguments' (0% included), else (none,
    or not a threshold) the default."""
    try:
        return parse_threshold(record.threshold)
    except ValueError:
        return DEFAULT_THRESHOLD


def parse_threshold(text: str | float) -> float:
    """'5%' -> 0.05, '0.05' -> 0.05, '12.5%' -> 0.125 (numbers are accepted as fractions).

    ValueError for anything that is not a number, negative, or >= 100%."""
    shown = repr(text)
    try:
        value = parse_percent(text)
    except ValueError:
        raise ValueError(f"threshold {shown} is not a number; write it like '5%' or '0.05'") from None
    if not math.isfinite(value):
        raise ValueError(f"threshold {shown} is not a finite number; write it like '5%' or '0.05'")
    if value < 0:
        raise ValueError(f"threshold {shown} is negative; a threshold is a slowdown like '5%' or '0.05'")
    if value >= 1.0:
        hint = f" (did you mean '{text}%'?)" if not str(text).strip().endswith("%") and value < 100 else ""
        raise ValueError(f"threshold {shown} is 100% or more{hint}; write it like '5%' or '0.05'")
    return value


@dataclass
class Verdict:
    time: str
    memory: str
    change: float | None
    memory_change: float | None
    base_ms: float | None
    now_ms: float | None
    threshold: float
    noise_bound: float | None
    message: str
    #: the part of noise_bound that no re-measurement of `now` can shrink (see fixed_bound)
    fixed_bound: float | None = None
    #: the share of the threshold a real change may fall short of it and still count (the prior's)
    margin: float = 0.0
    #: False where only one side was sampled in an unbroken loop (`loaded`): then at most unsure,
    #: and not re-measured
    comparable: bool = True
    #: the hardware counters' verdict (core.counters: more, less, same, other), None where a side has none
    counters: str | None = None

    @property
    def detectable(self) -> float | None:
        """The smallest slowdown this comparison would call `slower` (see `beyond`): past the noise
        bound and, less the margin, the threshold a test is held to (its smallest meaningful change
        included). None where no bound was computed."""
        if self.noise_bound is None:
            return None
        return max(self.noise_bound, self.threshold - min(self.noise_bound, self.margin * self.threshold))

    @property
    def changed(self) -> bool:
        """Time or peak memory read `slower` or `faster`: a change an A/B confirms in more rounds."""
        return self.time in CHANGES or self.memory in CHANGES

    def judgement(self) -> Judgement:
        """This verdict as a judged result keeps it."""
        return Judgement(self.time, self.memory, self.change, self.memory_change, self.noise_bound, self.fixed_bound,
                         self.detectable, self.message, self.counters, is_regression(self))


def relative_halfwidth(record: Measured) -> float:
    """Relative half-width of the 95% confidence interval of this record's median: infinite for a median
    of one sample (its interval is unbounded); from its noise where it names no interval."""
    stats = record.stats
    median = as_number(stats.median_ms)
    if median and stats.ci_ms is not None:
        return stats.ci_ms.half_width / median
    noise = as_number(stats.noise) or 0.0
    samples = as_number(stats.samples) or 1.0
    return Z * MEDIAN_SE_FACTOR * noise / math.sqrt(max(samples, 1.0))


def medians(record: Measured) -> list[float]:
    """A side's medians, one per process: its `history` where it has one, else its median."""
    return positive_numbers(record.history) or [float(record.stats.median_ms)]


def memory_peaks(record: Measured) -> list[int]:
    """A side's peak memory, one per recent recording: its `peak_memory_history` where it has one,
    else its peak (none where it has no peak)."""
    stored = record.peak_memory_history
    if isinstance(stored, list) and stored and all(as_number(v) is not None for v in stored):
        return [int(v) for v in stored]
    peak = as_number(record.peak_memory_bytes)
    return [] if peak is None else [int(peak)]


def legacy_sd(base: Measured) -> float | None:
    """A schema-1 entry's `drift` read as a run-to-run sd, until the entry has recordings enough."""
    drift = as_number(base.drift)
    if not drift or len(medians(base)) >= noise.LEGACY_UNTIL:
        return None
    return drift * noise.LEGACY_RANGE_TO_SD


def spread(base: Measured, now: Measured, prior: Prior = ACROSS_MACHINES, related: Sequence[float] = ()) -> noise.Spread:
    """The test's pooled run-to-run spread from both sides' medians, and `related` (medians of the test
    measured elsewhere, not compared, whose spread counts too: `gpuperf ab` passes the stored
    baseline's, ab_stored.stored_spreads)."""
    return noise.pooled_spread(medians(base), medians(now), prior, legacy_sd=legacy_sd(base),
                               related=positive_numbers(list(related)))


def _sampling_sd(record: Measured) -> float:
    """A side's own sampling error when it is a single median (rounds hold theirs in their spread)."""
    return relative_halfwidth(record) / Z if len(medians(record)) == 1 else 0.0


def noise_bound(base: Measured, now: Measured, prior: Prior = ACROSS_MACHINES) -> float:
    """The relative change that the run-to-run spread and the sides' sampling errors can explain."""
    return spread(base, now, prior).bound(math.hypot(_sampling_sd(base), _sampling_sd(now)))


#: Projected bounds (`could_decide`) are compared with this much slack: the spread they keep was
#: estimated from the rounds so far, and more rounds may narrow it.
PROJECTION_SLACK = 1.25


def projected_bound(base: Measured, now: Measured, rounds: int, prior: Prior = ACROSS_MACHINES,
                    related: Sequence[float] = ()) -> float:
    """The noise bound with `rounds` medians a side, the pooled spread as it stands: the smallest
    change more rounds of an A/B could still tell from noise (a side of several medians holds its
    sampling error in its spread, so none is added)."""
    pooled = spread(base, now, prior, related)
    added = max(rounds - pooled.n_base, 0) + max(rounds - pooled.n_now, 0)
    more = noise.Spread(pooled.sigma, pooled.df + added, max(pooled.n_base, rounds), max(pooled.n_now, rounds))
    return more.bound(0.0 if rounds > 1 else math.hypot(_sampling_sd(base), _sampling_sd(now)))


def could_decide(verdict: Verdict, bound: float) -> bool:
    """Could a comparison whose noise bound shrank to `bound` decide this unsure verdict? Yes where
    the bound (given slack for a spread more rounds may narrow) falls within the threshold, or where
    the change could be threshold-sized: it reaches the threshold less the prior's margin (one
    round's reading of a real change strays further than the rounds' mean). A verdict without a
    change is given the rounds."""
    if verdict.change is None:
        return True
    return (bound / PROJECTION_SLACK <= verdict.threshold
            or abs(verdict.change) >= verdict.threshold * (1.0 - verdict.margin))


def fixed_bound(base: Measured, now: Measured, prior: Prior = ACROSS_MACHINES) -> float:
    """The part of the noise bound that no re-measurement of `now` can shrink."""
    return spread(base, now, prior).bound(_sampling_sd(base))


def effective_threshold(threshold: float, base_ms: float, prior: Prior = ACROSS_MACHINES) -> float:
    """The threshold a test is held to: at least the prior's smallest meaningful change of its median."""
    return max(threshold, prior.min_change_ms / base_ms) if base_ms > 0 else threshold


def _judge_memory(base: Measured, now: Measured, threshold: float) -> tuple[str, float | None, str]:
    """Peak memory against the range of the stored recordings' peaks: one call's peak differs between
    processes of unchanged code (docs/gate.md), so growth counts past the largest, shrinking past the
    smallest. Growth is judged on `now`'s peak (an A/B side's lower middle one, `ab.combined`; a stored
    entry's largest), shrinking on the upper middle of its peaks where that is higher, so one A/B
    round's outlier makes no change appear."""
    peaks = memory_peaks(base)
    grown = as_number(now.peak_memory_bytes)
    if not peaks or grown is None:
        return "same", None, ""
    low, high = min(peaks), max(peaks)
    shrunk = max(grown, statistics.median_high(memory_peaks(now)))
    if grown - high > max(threshold * high, MEMORY_ABS_FLOOR):
        verdict, b, n = "slower", high, grown
    elif low - shrunk > max(threshold * low, MEMORY_ABS_FLOOR):
        verdict, b, n = "faster", low, shrunk
    else:
        n = grown
        verdict, b = "same", min(max(n, low), high)  # the nearest recorded peak
    change = (n / b - 1.0) if b > 0 else None
    shown = fmt_change(change) if change is not None else f"{fmt_bytes(n - b)}"
    stored = fmt_bytes(b) if low == high else f"{fmt_bytes(low)}-{fmt_bytes(high)}"
    text = f"peak memory {stored} -> {fmt_bytes(n)} ({shown})"
    if verdict != "same":
        text += f": {'grew' if verdict == 'slower' else 'shrank'} by more than {threshold * 100:.3g}% and 1 MiB"
    return verdict, change, text


def judge(base: Measured | None, now: Measured | None, threshold: float, prior: Prior = ACROSS_MACHINES,
          related: Sequence[float] = ()) -> Verdict:
    """Decide one test: ``base`` is the stored baseline entry, ``now`` this run's result; `prior` is
    the spread expected of the two sides before their own medians say more, and `related` medians of
    the test measured elsewhere whose spread counts too (see `spread`)."""
    threshold = float(threshold)
    if base is None and now is None:
        return Verdict("missing", "missing", None, None, None, None, threshold, None,
                       "missing: neither a baseline entry nor a measurement")
    if base is None:
        now_ms = as_number(now.stats.median_ms)
        return Verdict("new", "new", None, None, None, now_ms, threshold, None,
                       f"new: {fmt_ms(now_ms)}, no baseline entry to compare with")
    base_ms = as_number(base.stats.median_ms)
    if now is None:
        return Verdict("missing", "missing", None, None, base_ms, None, threshold, None,
                       f"missing: baseline {fmt_ms(base_ms)}, not measured in this run")
    now_ms = as_number(now.stats.median_ms)
    if not base_ms or base_ms <= 0 or not now_ms or now_ms <= 0:
        memory, memory_change, mem_text = _judge_memory(base, now, threshold)
        work = judge_record_counters(base, now)
        return Verdict("unsure", memory, None, memory_change, base_ms, now_ms, threshold, None,
                       f"unsure: cannot compare medians (baseline {fmt_ms(base_ms)}, now {fmt_ms(now_ms)})"
                       + (f"; {counters_text(work, 'unsure', None, None)}" if work.verdict else "")
                       + (f"; memory {memory}: {mem_text}" if memory != "same" else ""), counters=work.verdict)

    if prior is ACROSS_MACHINES and HOST_METHODS & {base.method, now.method}:
        prior = ON_HOST  # the host's clock times the host's load too
    base_ms, now_ms = noise.center(medians(base)), noise.center(medians(now))
    change = now_ms / base_ms - 1.0
    memory, memory_change, mem_text = _judge_memory(base, now, threshold)  # bytes: the threshold as given
    threshold = effective_threshold(threshold, base_ms, prior)
    pooled = spread(base, now, prior, related)
    bound = pooled.bound(math.hypot(_sampling_sd(base), _sampling_sd(now)))
    if beyond(change, bound, threshold, prior.margin_share):
        time = "slower"
    elif beyond(-change, bound, threshold, prior.margin_share):
        time = "faster"
    elif abs(change) > threshold or bound > threshold:
        time = "unsure"
    else:
        time = "same"
    judged = time
    loaded = base.loaded is True, now.loaded is True
    if loaded[0] != loaded[1] and time in CHANGES:
        time = "unsure"  # the cap held one side's clock in a loop, the other's between the harness's pauses
    clk_b, clk_n = as_number(base.sm_clock_mhz), as_number(now.sm_clock_mhz)
    # The side that read slower: this run for `slower`, the baseline for `faster`.
    slow, fast, sign = (now, base, 1.0) if time == "slower" else (base, now, -1.0)
    slowed = sorted(_slowdowns(slow) - _slowdowns(fast))
    capped = all(loaded) and not slowed  # the power cap set both sides' clocks, the slower side's lower
    held = time in CHANGES and (bool(slowed) or capped) and bool(clk_b and clk_n) and (
        sign * (clk_b - clk_n) > 0) and not beyond(  # the slower side ran at the lower clock,
        sign * ((1.0 + change) * clk_n / clk_b - 1.0), bound, threshold, prior.margin_share)  # which explains it
    if held:
        time = "unsure"
    nodes, whose = _graph_nodes(base, now)
    replay_ms = _replay_shift_ms(base, now, nodes)
    sign = 1.0 if time == "slower" else -1.0
    replayed = time in CHANGES and sign * replay_ms > 0 and not beyond(
        sign * ((now_ms - replay_ms) / base_ms - 1.0), bound, threshold, prior.margin_share)
    if replayed:
        time = "unsure"

    sides = f"{pooled.n_base} vs {pooled.n_now} runs, " if pooled.n_base > 1 or pooled.n_now > 1 else ""
    parts = [
        f"{time}: baseline {fmt_ms(base_ms)}, now {fmt_ms(now_ms)}, change {fmt_change(change)}"
        f" (threshold {threshold * 100:.3g}%, noise ±{bound * 100:.1f}%: {sides}run-to-run sd "
        f"{pooled.sigma * 100:.2f}%)"
    ]
    if judged == "unsure":
        if abs(change) > threshold:
            parts.append("the change is within the noise")
        else:
            parts.append("the noise is larger than the threshold, so a threshold-sized change could not be seen")
    if loaded[0] != loaded[1]:
        parts.append(f"only {'the baseline' if loaded[0] else 'this run'} was sampled in an unbroken loop (the "
                     "power cap held its clock down), so it is not judged slower or faster: record it again")
    lower, higher = ("this run", "the baseline") if judged == "slower" else ("the baseline", "this run")
    if held and slowed:
        again = "run it again" if judged == "slower" else "record the baseline again (an A/B: run it again)"
        parts.append(f"a {', '.join(slowed)} slowdown held {lower}'s clocks down and not {higher}'s, and the "
                     f"lower clock explains the change, so it is not judged {judged}: {again} on a cooler GPU")
    elif held:
        clocks = (clk_n, clk_b) if judged == "slower" else (clk_b, clk_n)
        parts.append(f"the power cap held both sides' clocks, {lower}'s at {clocks[0]:.0f} MHz against "
                     f"{higher}'s {clocks[1]:.0f}, and the lower clock explains the change, so it is not judged "
                     f"{judged} (the GPU's power state, not the code): counters decide it "
                     "(--gpuperf-count-undecided)")
    once = [side for side, r in (("the baseline", base), ("this run", now)) if len(medians(r)) == 1
            and r.stats.ci_ms is not None and not r.stats.ci_ms.bounded]
    if once:
        parts.append(f"{' and '.join(once)} timed the call once (it outlasts the sampling budget), so "
                     f"{'their medians have' if len(once) > 1 else 'its median has'} no interval and time cannot "
                     "decide: raise --gpuperf-budget")
    if replayed:
        nodes_text = f" ({nodes:.0f} kernels a call, {whose})" if nodes > 1 else ""
        parts.append(f"{'this run' if replay_ms > 0 else 'the baseline'}'s process replayed CUDA graphs "
                     f"{abs(_replay_us(now) - _replay_us(base)):.2f} µs per node slower than the other's"
                     f"{nodes_text} "
                     f"(baseline {_replay_us(base):.2f}, now {_replay_us(now):.2f} above a fresh process, after "
                     f"large kernels ran in it), which explains the change, so it is not judged "
                     f"{'slower' if replay_ms > 0 else 'faster'}: see docs/measurement.md, \"Replay state\"")
    # One measurement's samples: a record pooling several (A/B rounds) carries only the last one's.
    one_run = time in CHANGES and len(medians(now)) == 1
    shift = level_shift(positive_numbers(now.stats.data), Z) if one_run else None  # an entry keeps no samples
    if shift is not None and shift * change > 0 and abs(shift) >= SHIFT_SHARE * abs(change):
        parts.append(f"this run's samples read {fmt_change(shift)} from their first quarter's median to their "
                     "last's: its speed changed while it was measured; run it again")
    if clk_b and clk_n and abs(clk_n / clk_b - 1.0) > 0.02:
        parts.append(f"SM clock {clk_b:.0f} -> {clk_n:.0f} MHz")
    throttle = throttle_reasons(now)
    if throttle:
        parts.append("throttled: " + ",".join(throttle))
    if memory != "same":
        parts.append(f"memory {memory}: {mem_text}")
    work = judge_record_counters(base, now)
    if work.verdict is not None:
        parts.insert(1, counters_text(work, time, clk_b, clk_n))
    return Verdict(time, memory, change, memory_change, base_ms, now_ms, threshold, bound, "; ".join(parts),
                   pooled.bound(_sampling_sd(base)), prior.margin_share, loaded[0] == loaded[1], work.verdict)


def judge_record_counters(base: Measured, now: Measured) -> CounterVerdict:
    """The counters of two records judged."""
    return judge_counters(base.counters, now.counters)


def counters_text(work: CounterVerdict, time: str, clk_b: float | None, clk_n: float | None) -> str:
    """The part of a message that says whether the code or the machine moved: 'the code did more
    work: instructions +12%', or 'same instructions and DRAM bytes: the machine, not the code'."""
    if work.verdict == MORE:
        lead = "the code did more work" + (", though it ran faster" if time == "faster" else "")
        return f"counters more: {lead}: {work.message}" + (
            "" if time in CHANGES else f"; timing alone read {time}")
    if work.verdict == LESS:
        return f"counters less: the code did less work: {work.message}"
    if work.verdict == OTHER:
        return f"counters other: {work.message}"
    text = f"counters same: {work.message}"
    if time in CHANGES and not work.moved:
        clock = f", SM clock {clk_b:.0f} vs {clk_n:.0f} MHz" if clk_b and clk_n else ""
        text += f"{clock}: likely the machine, not the code"
    return text


def _replay_us(record: Measured) -> float:
    """µs per node a graph-timed record's process replayed graphs slower than a fresh one (0 if not)."""
    us = as_number(record.slow_replay_us) if record.method == Method.GRAPH.value else None
    return us if us is not None and us > 0 else 0.0


def _graph_nodes(base: Measured, now: Measured) -> tuple[float, str]:
    """Kernels a call launches (graph nodes per call) and whose count that is: this run's counted
    launches (the fewer of the two sides' where both were counted); where only the baseline was
    counted, its count, assuming the code launches what it recorded (unchanged code's launch counts
    were the same in every process); 1 where neither was."""
    mine, stored = (c.center("launches") if c is not None else None for c in (now.counters, base.counters))
    if mine is not None:
        return (mine if stored is None else min(mine, stored)), "counted"
    if stored is not None:
        return stored, "the baseline's count"
    return 1.0, ""


def _replay_shift_ms(base: Measured, now: Measured, nodes: float) -> float:
    """How much higher per call the slow replay state can make `now` read than `base` (ms; negative
    where the baseline's process was the slower one), for a call of `nodes` kernels (_graph_nodes)."""
    charge = REPLAY_CHARGE + REPLAY_CHARGE_FURTHER * (nodes - 1) if nodes >= 1 else 0.0
    return charge * (_replay_us(now) - _replay_us(base)) / 1e3


def throttle_reasons(record: Measured) -> list[str]:
    """The NVML clock-event reasons a record's measurement saw (one name alone counts as a list)."""
    throttle = record.throttle
    names = [throttle] if isinstance(throttle, str) else throttle if isinstance(throttle, (list, tuple)) else []
    return [name for name in names if isinstance(name, str)]


def _slowdowns(record: Measured) -> set[str]:
    """The thermal and hardware slowdowns (SEVERE_THROTTLE) a record's measurement saw."""
    return SEVERE_THROTTLE & set(throttle_reasons(record))


def beyond(change: float, bound: float, threshold: float, margin: float = 0.0) -> bool:
    """Is this change (a slowdown when positive) real and possibly threshold-sized? See the module doc."""
    return change > bound and change + min(bound, margin * threshold) >= threshold


def undecided_same(r: Result) -> bool:
    """A `same` whose smallest detectable change exceeds the threshold the test asked for: the time
    could not have seen a threshold-sized change, so it decided nothing."""
    return is_undecided(r.judged.verdict, r.judged.detects, r.threshold)


def is_undecided(verdict: str | None, detects: float | None, threshold: float | None) -> bool:
    """Is this verdict a `same` that could not have seen a change of `threshold` (see undecided_same)?"""
    detects, threshold = as_number(detects), as_number(threshold)
    return verdict == "same" and detects is not None and threshold is not None and detects > threshold


def undecided_by_time(r: Result) -> bool:
    """Could the time not decide this test (unsure, or an undecided same)?"""
    return r.judged.verdict == "unsure" or undecided_same(r)


def is_regression(v: Verdict) -> bool:
    """Does this verdict fail the test? A slowdown, more peak memory, or more work by the counters
    where time did not decide it was faster."""
    return fails(v.time, v.memory, v.counters)


def fails(time: str | None, memory: str | None, counters: str | None) -> bool:
    """`is_regression` on a verdict's words (time, memory, counters), as a results file stores them."""
    return time == "slower" or memory == "slower" or (counters == MORE and time != "faster")


def is_suspect(v: Verdict) -> bool:
    """Should the plugin re-measure before deciding? A slowdown, or an unsure result that some
    re-measurement could turn into `slower`. The plugin keeps the fastest of its measurements, so
    the change can only shrink, and the bound cannot fall below `fixed_bound` nor reach the change:
    an unsure result can become slower only if the change is beyond `fixed` and reaches the
    threshold with the largest margin such a bound allows. A test whose run-to-run spread alone
    exceeds its threshold stays unsure however often it is measured, and is not re-measured."""
    if v.time == "slower" or v.memory == "slower":
        return True
    if v.time != "unsure" or v.change is None or not v.comparable:
        return False
    fixed = v.fixed_bound if v.fixed_bound is not None else 0.0
    return v.change > fixed and v.change + min(v.change, v.margin * v.threshold) >= v.threshold


def remeasure_while_suspect(base: Measured | None, run: Callable[[], tuple[Result, T]], threshold: float,
                            retries: int, judging: bool = True) -> tuple[Result, T, Verdict | None, int]:
    """The gate's re-measurement rule, for the plugin and its self-check alike: take a (record,
    payload) from `run`, judge the fastest record so far against `base`, and run again while the
    verdict is suspect (`is_suspect`), at most `retries` more times. Only the fastest run so far is
    kept. Returns its record and payload, its verdict (None when not `judging`) and the number of
    runs after the first."""
    best: tuple[Result, T] | None = None
    for attempt in range(retries + 1):
        record, payload = run()
        if best is None or record.stats.median_ms < best[0].stats.median_ms:
            best = (record, payload)
        verdict = judge(base, best[0], threshold) if judging else None
        if verdict is None or not is_suspect(verdict):
            break
    return best[0], best[1], verdict, attempt


def judge_all(base_entries: Mapping[str, Measured], now_results: Mapping[str, Measured], threshold: float,
              thresholds: Mapping[str, float] | None = None, prior: Prior = ACROSS_MACHINES) -> dict[str, Verdict]:
    """Judge every test id present on either side; ``thresholds`` overrides per test id.

    Returns test id -> Verdict, sorted by test id; ids only in the baseline are "missing", ids only in
    ``now_results`` are "new"."""
    thresholds = thresholds or {}
    out = {}
    for key in sorted(set(base_entries) | set(now_results)):
        out[key] = judge(base_entries.get(key), now_results.get(key), thresholds.get(key, threshold), prior)
    return out
