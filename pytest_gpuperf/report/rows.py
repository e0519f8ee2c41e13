"""What the report's tables and plots share: grouping and ordering of result records, cells, and
summary lines. Records group by what tests declare: the marker's `group`, else the test's name."""
from __future__ import annotations

import collections
import re
import statistics
from collections.abc import Mapping
from typing import Iterable

from ..core.counters import LESS, MORE, OTHER, SAME
from ..core.records import Phase, Result, nodeid_name, nodeid_param, record_group
from ..core.verdict import is_undecided, undecided_by_time, undecided_same
from ..core.timeline import Outside
from ..core.units import as_number, fmt_bytes, fmt_change, fmt_ms, fmt_pct, fmt_rate, plural
from ..core.peak_names import peak_label

__all__ = ["COLUMNS", "PARAM_MIN_WIDTH", "cells_of", "ceiling_line", "detects_text", "device_line", "fmt_change",
           "fmt_mem",
           "fmt_pct", "fmt_rate", "grouped", "kept_columns", "middle_truncate", "natural_key", "nodeid_name",
           "nodeid_param", "param_width", "peaks_text", "record_group", "row_key", "series_and_case", "summary_counts", "counters_line",
           "counter_words",
           "first_calls_lines", "undecided_by_time", "undecided_same",
           "time_line", "is_undecided", "verdict_parts", "verdict_text"]


def fmt_mem(x: float | None) -> str:
    x = as_number(x)
    return "-" if x is None else fmt_bytes(x)


def middle_truncate(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    keep = width - 1
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def natural_key(text: str) -> list:
    return [(0, int(tok), "") if tok.isdigit() else (1, 0, tok) for tok in re.split(r"(\d+)", text) if tok]



def series_and_case(param: str) -> tuple[str, str] | None:
    """The one place that reads meaning into a parametrization id: pytest joins the ids of stacked
    parametrize decorators with '-'; the first is taken as the series (an implementation) and the
    rest as the case ('triton-float32-16M' -> ('triton', 'float32-16M')). None for a one-part id."""
    parts = str(param or "").split("-")
    return (parts[0], "-".join(parts[1:])) if len(parts) >= 2 else None


def row_key(param: str) -> tuple[list, list]:
    """Sort rows so that the series (implementations) of one case are adjacent."""
    split = series_and_case(param)
    if split is not None:
        return (natural_key(split[1]), natural_key(split[0]))
    return (natural_key(param or ""), [])


def grouped(results: Iterable[Result]) -> list[tuple[str, list[Result]]]:
    groups: dict[str, list[Result]] = {}
    for r in results:
        groups.setdefault(record_group(r), []).append(r)
    return [(g, sorted(rows, key=lambda r: row_key(r.id.param or ""))) for g, rows in
            sorted(groups.items(), key=lambda kv: natural_key(kv[0]))]


def verdict_text(r: Result) -> str:
    v = r.judged.verdict or ""
    if undecided_same(r):
        v = "same?"  # counted as undecided: the time could not see a change of the test's threshold
    mem = r.judged.memory_verdict
    if mem in ("slower", "faster"):
        v = (v + ", " if v else "") + ("more memory" if mem == "slower" else "less memory")
    work = r.judged.counter_verdict
    if work in ("more", "less") or (work == "same" and undecided_by_time(r)):
        v = (v + ", " if v else "") + f"{work} work"
    return v


#: The order verdicts are counted in, in the summaries ("undecided": read same, but by time could
#: not see a change of its threshold).
VERDICT_ORDER = ("slower", "unsure", "undecided", "faster", "same", "new", "missing")


def counters_line(results: list[Result], counting: str = "--gpuperf-counters") -> str | None:
    """What the counters decided: more or less work anywhere, and among the tests the time could not
    decide, how many the counters decided; None where no result was judged by time. `counting`: the
    option that counts them, where none was counted."""
    undecided = [r for r in results if undecided_by_time(r)]
    judged = [r for r in results if r.judged.counter_verdict]
    if not undecided and not judged:
        return None
    words = collections.Counter(r.judged.counter_verdict for r in judged)
    # `other`: other kernels ran than recorded, so the counts were not compared and decided nothing
    decided = sum(1 for r in undecided if r.judged.counter_verdict in (MORE, LESS, SAME))
    text = f"gpuperf: {plural(len(undecided), 'test')} undecided by time"
    if judged:
        text += (f"; counters judged {plural(len(judged), 'test')} ({counter_words(words)}) and decided "
                 f"{decided} of the {len(undecided)}")
    elif any(r.counters for r in results):
        text += ": the baseline holds no counters to judge them by; record them (--gpuperf-counters --gpuperf-save)"
    else:
        text += f": {counting} decides them by hardware counters"
    return text


def counter_words(words: Mapping[str, int]) -> str:
    """'3 more work, 40 same work, 1 other kernels than recorded': how many tests got each counter verdict."""
    return ", ".join(f"{words[w]} {w} work" if w != OTHER else f"{words[w]} other kernels than recorded"
                     for w in (MORE, LESS, SAME, OTHER) if words.get(w))


def _pct(x: float) -> str:
    """A relative change as a short percentage: '6.2%' below 10%, '14%' above."""
    return fmt_pct(x * 100, 1 if x < 0.1 else 0)


def _unseen_text(pairs: list[tuple[float, float]]) -> str:
    """How many unsure tests could not see a change of their threshold and what they could see, from
    their (noise_bound, threshold) pairs: '12 could not see a 5% change; they could see 6.1-14%,
    median 8.0%'. Empty when none."""
    if not pairs:
        return ""
    bounds = sorted(b for b, _ in pairs)
    thresholds = sorted({t for _, t in pairs})
    if len(thresholds) == 1:
        change = f"a {thresholds[0] * 100:.3g}% change"
    else:
        change = f"a change of their threshold ({thresholds[0] * 100:.3g}-{thresholds[-1] * 100:.3g}%)"
    low, high = _pct(bounds[0]), _pct(bounds[-1])
    seen = low if low == high else f"{low[:-1]}-{high}"
    if len(bounds) >= 3:
        seen += f", median {_pct(statistics.median(bounds))}"
    if len(pairs) == 1:
        return f"1 could not see {change}; it could see {seen}"
    return f"{len(pairs)} could not see {change}; they could see {seen}"


def verdict_parts(judged: Iterable[tuple[str | None, float | None, float | None]]) -> list[str]:
    """'2 slower', '31 unsure (12 could not see ...)', ... from each test's (verdict, noise_bound,
    threshold): an unsure test whose noise bound, its smallest detectable change, exceeds its threshold
    could not have seen a threshold-sized change, however it turned out."""
    counts: dict[str, int] = {}
    unseen = []
    for verdict, bound, threshold in judged:
        if not verdict:
            continue
        counts[verdict] = counts.get(verdict, 0) + 1
        if verdict == "unsure" and bound is not None and threshold is not None and bound > threshold:
            unseen.append((bound, threshold))
    parts = [f"{counts[v]} {v}" for v in VERDICT_ORDER if counts.get(v)]
    if unseen:
        i = parts.index(f"{counts['unsure']} unsure")
        parts[i] += f" ({_unseen_text(unseen)})"
    return parts


def summary_counts(results: list[Result]) -> str:
    """The session's summary line: tests measured, counted by verdict, and what the unsure could see."""
    mem_slower = sum(1 for r in results if r.judged.memory_verdict == "slower")
    measured = sum(1 for r in results if r.judged.verdict != "missing")
    text = f"{measured} measured"
    parts = verdict_parts(("undecided" if undecided_same(r) else r.judged.verdict, as_number(r.judged.noise_bound),
                           as_number(r.threshold)) for r in results)
    if mem_slower:
        parts.append(f"{mem_slower} with more peak memory")
    return text + (": " + ", ".join(parts) if parts else "")


def ceiling_line(results: list[Result]) -> str | None:
    """Which results beat the peak they are held against, and so set their own ceiling (100% of
    peak); None when none did."""
    above = [r for r in results
             if (as_number(r.above_peak) or 0) > 0 and as_number(r.pct_of_peak) is not None]
    if not above:
        return None
    top = max(above, key=lambda r: as_number(r.above_peak))
    counted = f"{plural(len(above), 'result')} beat{'' if len(above) > 1 else 's'}"
    return (f"{counted} the peak probe {'they are' if len(above) > 1 else 'it is'} held against: 'kernel' sets "
            f"the ceiling (100%); furthest {top.id.nodeid or top.id.name}, {as_number(top.above_peak):.1%} over "
            f"{peak_label(top.peak)} (docs/measurement.md)")


def time_line(results: list[Result], session_s: float, span: str = "since start", processes: int = 1,
              outside: Outside | None = None) -> str:
    """Where the session's time went, so a slow suite says what to cut: first calls (compiling,
    autotuning), samples, the harness's own warm-up and calibration (by Phase, where results carry
    them), and everything outside gpu_benchmark (inputs, references, correctness checks, profiling,
    collection, a worker's start), broken down where the test reports' times give `outside`. `span`
    names the time `session_s` covers; `processes` (pytest-xdist's workers) each had all of it, so the
    time outside measurements is theirs together."""
    def total(key: str) -> float:
        return sum(as_number(getattr(r, key)) or 0.0 for r in results)

    wall, first, sampled = total("wall_s"), total("first_call_s"), total("measured_s")
    again = sum(int(as_number(r.remeasured) or 0) for r in results)
    repeated = f"; {plural(again, 'repeated run')} (suspects re-measured, or recordings)" if again else ""
    workers = f" in each of {processes} workers" if processes > 1 else ""
    return (f"gpuperf: {session_s:.1f} s {span}{workers}: {plural(len(results), 'measurement')} {wall:.1f} s "
            f"(first calls, i.e. "
            f"compiling and autotuning, {first:.1f} s; samples {sampled:.1f} s; warm-up and calibration "
            f"{max(wall - first - sampled, 0.0):.1f} s" + _phase_parts(results) + repeated
            + (f"), outside measurements {outside.total_s:.1f} s{_outside_parts(outside)}" if outside is not None
               else f"), outside measurements {max(session_s * max(processes, 1) - wall, 0.0):.1f} s"))


def _outside_parts(outside: Outside) -> str:
    """': before the first test 61.0 s (...), the tests' own work 91.1 s (test_x 34.7 s, ...), ...'."""
    heaviest = ", ".join(f"{name} {s:.1f} s" for name, s in outside.heaviest)
    return (f": before the first test {outside.before_first_test_s:.1f} s (start, collection, compiling ahead, "
            f"node gap), "
            f"the tests' own work {outside.own_work_s:.1f} s" + (f" ({heaviest})" if heaviest else "")
            + f", after the last test {outside.after_last_test_s:.1f} s{_ends_part(outside)}, between tests "
              f"{outside.between_tests_s:.1f} s")


def _ends_part(outside: Outside) -> str:
    """' (the workers' last tests ended 6.2 s apart; the last: f.py::test_x 4.1 s)', with several workers."""
    if outside.last_test is None:
        return ""
    nodeid, seconds = outside.last_test
    return (f" (the workers' last tests ended {outside.ends_apart_s:.1f} s apart; the last: {nodeid} "
            f"{seconds:.1f} s)")


#: The closing summary names this many of the slowest first calls...
FIRST_CALLS_SHOWN = 5
#: ...among those at least this long: loading a cached kernel takes milliseconds, compiling one seconds.
FIRST_CALL_NOTABLE_S = 0.5


def first_calls_lines(results: list[Result]) -> list[str]:
    """The first calls (compiling, autotuning, loading) of FIRST_CALL_NOTABLE_S or more, counted, and the
    slowest of them, longest first: what a cold compile cache costs, and where; [] when none took that."""
    seconds = ((as_number(r.first_call_s) or 0.0, str(r.id.nodeid or r.id.name)) for r in results)
    slow = sorted(((s, nodeid) for s, nodeid in seconds if s >= FIRST_CALL_NOTABLE_S), key=lambda x: (-x[0], x[1]))
    if not slow:
        return []
    head = (f"gpuperf: {plural(len(slow), 'first call')} took {FIRST_CALL_NOTABLE_S:g} s or more (compiling, "
            f"autotuning), {sum(s for s, _ in slow):.1f} s in all; the slowest (each test's is first_call_s in the JSON):")
    return [head] + [f"  {s:6.1f} s  {nodeid}" for s, nodeid in slow[:FIRST_CALLS_SHOWN]]


def _phase_parts(results: list[Result]) -> str:
    """': power cap 67.0 s, ...' — the harness's own time by Phase, largest first; "around the
    samples" is the sampling phase less the samples' device time: flushes, spins, event frames, the
    host reading each batch and, for a loaded call, the untimed calls between batches."""
    seconds: dict[str, float] = collections.defaultdict(float)
    sampled = 0.0
    for r in results:
        if r.phases:
            sampled += as_number(r.measured_s) or 0.0
        for phase, value in (r.phases or {}).items():
            seconds[phase] += as_number(value) or 0.0
    if not seconds:
        return ""
    seconds["around the samples"] = seconds.pop(Phase.SAMPLES.value, 0.0) - sampled
    parts = sorted(((v, k) for k, v in seconds.items() if v >= 0.05), reverse=True)
    return ": " + ", ".join(f"{k} {v:.1f} s" for v, k in parts) if parts else ""


def replay_line(results: list[Result]) -> str | None:
    """Which results were measured while the process replayed CUDA graphs slower than a fresh one
    (`slow_replay_us`, measure/replay_state.py), from which test on; None where none were."""
    slowed = [r for r in results if (as_number(r.slow_replay_us) or 0.0) > 0]
    if not slowed:
        return None
    us = sorted(as_number(r.slow_replay_us) for r in slowed)
    span = f"{us[0]:.2f}" if us[0] == us[-1] else f"{us[0]:.2f}-{us[-1]:.2f}"
    first = slowed[0].id.nodeid or slowed[0].id.name
    were = "was" if len(slowed) == 1 else "were"
    return (f"gpuperf: {plural(len(slowed), 'graph-timed result')} {were} measured while this process replayed "
            f"CUDA graphs {span} µs per node slower than a fresh process (from {first} on, after large kernels ran "
            f"in it); their medians can read a few tenths of a µs per kernel high (docs/measurement.md, \"Replay state\")")


def peaks_text(peaks: dict | None) -> str:
    shown = []
    for k, v in (peaks or {}).items():
        if as_number(v) is None:
            continue
        if k.endswith("_gbps"):
            shown.append(f"{k[:-5]} {fmt_rate(v)} GB/s")
        elif k.endswith("_tflops"):
            shown.append(f"{k[:-7]} {fmt_rate(v)} TFLOP/s")
        else:
            shown.append(f"{k} {v}")
    return ", ".join(shown)


def device_line(device: dict | None) -> str:
    if not device:
        return "device: unknown"
    text = f"{device.get('name') or device.get('key')} ({device.get('key')})"
    peaks = peaks_text(device.get("peaks"))
    if peaks:
        text += " · peaks: " + peaks
    return text



COLUMNS = (  # header, width, align
    ("median", 10, ">"),
    ("±noise", 7, ">"),
    ("detects", 7, ">"),  # a judged test's smallest detectable change (Verdict.detectable)
    ("runs", 4, ">"),  # an unjudged entry's recordings, from which the gate learns its spread (gpuperf show)
    ("GB/s", 7, ">"),
    ("TFLOP/s", 7, ">"),
    ("% peak", 6, ">"),
    ("of", 12, ">"),  # the peak that % is of (peak_label: up to "copy 128 KiB")
    ("peak mem", 10, ">"),
    ("vs base", 7, ">"),
)


def detects_text(detects: float | None) -> str:
    """A test's smallest detectable change (`Verdict.detectable`) as a percentage; '-' when not judged."""
    return fmt_pct(None if detects is None else detects * 100)


def runs_text(r: Result) -> str:
    """The recordings an unjudged record's `history` holds ('1' without one); '-' for a judged record,
    whose detectable change says more."""
    if r.judged.verdict:
        return "-"
    history = r.history
    return str(len(history)) if isinstance(history, list) and history else "1"


def cells_of(r: Result) -> list[str]:
    noise = as_number(r.stats.noise)
    return [
        fmt_ms(as_number(r.stats.median_ms)),
        "-" if noise is None else f"{noise * 100:.1f}%",
        detects_text(as_number(r.judged.detects if r.judged.detects is not None else r.judged.noise_bound)),
        runs_text(r),
        fmt_rate(r.gbps),
        fmt_rate(r.tflops),
        fmt_pct(r.pct_of_peak),
        "-" if as_number(r.pct_of_peak) is None else peak_label(r.peak, as_number(r.above_peak)),
        fmt_mem(r.peak_memory_bytes),
        fmt_change(r.judged.change),
    ]


#: Params are never cut shorter than this to fit a narrow terminal: pytest writes 80 columns into a CI
#: log, where "torch_…6D128" would no longer tell torch_flash from torch_cudnn or causal from full.
PARAM_MIN_WIDTH = 60


#: Cells that leave a column empty: "runs" says something only where some entry has more than one.
_BLANK = {"runs": ("-", "", "1")}


def kept_columns(rows: Iterable[list[str]]) -> list[int]:
    """Indices of the COLUMNS that some row fills (the median always)."""
    rows = list(rows)
    return [k for k, (name, _, _) in enumerate(COLUMNS)
            if name == "median" or any(cells[k] not in _BLANK.get(name, ("-", "")) for cells in rows)]


def param_width(longest: int, room: int) -> int:
    return max(5, min(longest, max(room, PARAM_MIN_WIDTH)))
