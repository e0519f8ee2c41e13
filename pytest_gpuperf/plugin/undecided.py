"""--gpuperf-count-undecided: once every test is timed, the tests whose time could not decide them
against their baseline (unsure, or a `same` that could not see its threshold) are counted by Nsight
Compute, one counting process per GPU the run timed on, and judged again with their counters
(docs/counters.md, "Counting only what time left open"). Where time decides most tests this costs a
fraction of counting every test before timing (--gpuperf-counters)."""
from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.counters import Counters, declared_bytes_note
from ..core.records import Result
from ..core.shards import partition
from ..core.units import plural
from ..core.verdict import judge
from ..report.rows import undecided_by_time
from ..store.plan import Plan


@dataclass
class Recount:
    """What counting after timing did: the tests it was asked to count, the counters it gave, the
    tests whose counters now fail them, and why a counting process gave nothing."""

    asked: list[str]
    counters: dict[str, Counters] = field(default_factory=dict)
    regressions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall, the processes at once
    processes: int = 0
    counted_s: float = 0.0  # the processes' counted calls (ncu's replays), summed
    warm_s: float = 0.0  # their warm-up calls, summed

    def note(self) -> str:
        """One line for the summary."""
        if not self.asked:
            return "count-undecided: time decided every test that has baseline counters; nothing to count"
        text = (f"count-undecided: counted {len(self.counters)} of the {plural(len(self.asked), 'test')} time "
                f"could not decide, after timing, in {self.seconds:.0f} s ({plural(self.processes, 'process', 'processes')} "
                f"at once; counted calls {self.counted_s:.0f} s and their warm-up calls {self.warm_s:.0f} s "
                f"summed over them)")
        if self.regressions:
            text += f"; {plural(len(self.regressions), 'test')} did more work: {', '.join(self.regressions[:5])}"
        if self.problems:
            text += "; " + "; ".join(sorted(set(self.problems)))
        return text


def undecided_tests(records: Mapping[str, dict[str, Any]]) -> list[str]:
    """The timed tests that time could not decide and whose baseline entry holds counters to judge
    them by (a test counted already is decided by its counters)."""
    out = []
    for nodeid, record in records.items():
        result = Result.from_dict(record)
        base = result.baseline
        if (result.judgement is not None and result.counters is None and base is not None
                and base.counters is not None and undecided_by_time(result)):
            out.append(nodeid)
    return sorted(out)


def rejudged(record: dict[str, Any], counters: Counters, l2_bytes: int | None, threshold: float) -> dict[str, Any]:
    """The record with `counters`, judged again against its baseline entry at the threshold it was
    judged at when timed (`threshold` where it names none), and its declared bytes held against the
    DRAM bytes moved."""
    result = Result.from_dict(record)
    result.counters = counters
    note = declared_bytes_note(result.bytes, counters, l2_bytes)
    if note and note not in result.warnings:
        result.warnings = [*result.warnings, note]
    held_to = result.threshold if result.threshold is not None else threshold
    result.judgement = judge(result.baseline, result, held_to).judgement()
    return {**record, **result.to_dict()}


def count_undecided(records: dict[str, dict[str, Any]], run: Callable[..., Any], args: Sequence[str], cwd: Path,
                    xdist: bool, devices: Sequence[int | None], say: Callable[[str], None], threshold: float,
                    l2_bytes: int | None = None) -> Recount:
    """Count the undecided tests of `records` (test id -> record, updated in place with their
    counters and new judgements), one counting process per device of `devices` (None: the one the
    user's arguments pick) at once, each given its part of the tests, split by recorded measuring
    time. `run` is measure.counters.run_counting; `threshold` the session's, for a record that names
    none."""
    from ..measure.counters import CounterError, CounterRun

    recount = Recount(undecided_tests(records))
    if not recount.asked:
        return recount
    costs = {nodeid: records[nodeid].get("wall_s") for nodeid in recount.asked}
    parts = [p for p in partition(recount.asked, costs, max(1, min(len(devices), len(recount.asked)))) if p]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpuperf-undecided-") as folder:

        def one(index: int) -> CounterRun:
            plan = Path(folder) / f"plan-{index}.json"
            Plan(select=parts[index]).write(plan)
            device = devices[index]
            extra = [f"--gpuperf-ab-plan={plan}"] + ([f"--gpuperf-device={device}"] if device is not None else [])
            try:
                return run(args, cwd, xdist, say, extra=extra, when=f"after timing, {plural(len(parts[index]), 'test')}"
                           + (f" on GPU {device}" if device is not None else ""))
            except CounterError as exc:
                recount.problems.append(f"no counters: {exc}")
                return CounterRun()

        with ThreadPoolExecutor(max_workers=len(parts)) as pool:
            for counted in pool.map(one, range(len(parts))):
                recount.counters.update(counted.counters)
                recount.counted_s += counted.counted_s
                recount.warm_s += counted.warm_s
    recount.seconds, recount.processes = time.perf_counter() - started, len(parts)
    for nodeid, counters in recount.counters.items():
        if nodeid in records:
            records[nodeid] = rejudged(records[nodeid], counters, l2_bytes, threshold)
            if records[nodeid].get("regression"):
                recount.regressions.append(nodeid)
    return recount
