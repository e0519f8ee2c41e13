"""--gpuperf-count-undecided: once every test is timed, the tests whose time could not decide them
against their baseline (unsure, or a `same` that could not see its threshold) are counted by Nsight
Compute, one counting process per GPU the run timed on, and judged again with their counters; so
are the `slower` ones, whose messages then say whether the code did more work or the machine ran
slower
(docs/counters.md, "Counting only what time left open"). Where time decides most tests this costs a
fraction of counting every test before timing (--gpuperf-counters)."""
from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.child import without_options
from ..core.counters import MORE, SAME, Counters, with_declared_note
from ..core.records import Result
from ..core.shards import partition
from ..core.units import plural
from ..core.verdict import judge, undecided_by_time
from ..store.plan import Plan

#: The option of the user's arguments a counting process leaves out: the plan names its tests exactly,
#: and a shard cut in that process (which drops --lf and the like) could leave some of them out.
SHARD_OPTION = "--gpuperf-shard"


@dataclass
class Recount:
    """What counting after timing did: the tests it was asked to count, the counters it gave, the
    tests whose counters now fail them, and why a counting process gave nothing."""

    asked: list[str]
    counters: dict[str, Counters] = field(default_factory=dict)
    more_work: list[str] = field(default_factory=list)
    slower_same_work: list[str] = field(default_factory=list)  # slower by time, the same work by the counters
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall, the processes at once
    processes: int = 0
    counted_s: float = 0.0  # the processes' counted calls (ncu's replays), summed
    warm_s: float = 0.0  # their warm-up calls, summed

    def note(self) -> str:
        """One line for the summary."""
        if not self.asked:
            return ("count-undecided: time decided every test whose baseline entry holds counters, none slower; "
                    "nothing to count")
        text = (f"count-undecided: counted {len(self.counters)} of the {plural(len(self.asked), 'test')} time "
                f"could not decide or read slower, after timing, in {self.seconds:.0f} s "
                f"({plural(self.processes, 'process', 'processes')} at once; counted calls {self.counted_s:.0f} s "
                f"and their warm-up calls {self.warm_s:.0f} s summed over them)")
        if self.more_work:
            text += f"; {plural(len(self.more_work), 'test')} did more work: {', '.join(self.more_work[:5])}"
        if self.slower_same_work:
            text += (f"; {plural(len(self.slower_same_work), 'slower test')} did the same work (likely the machine, "
                     f"not the code): {', '.join(self.slower_same_work[:5])}")
        if self.problems:
            text += "; " + "; ".join(sorted(set(self.problems)))
        return text


def refusal(records: Mapping[str, dict[str, Any]], compare: bool) -> str | None:
    """Why nothing can be counted after timing (no comparison, no baseline counters), as one line;
    None where the undecided tests can be counted."""
    if not compare:
        return "count-undecided: nothing is judged under --gpuperf-no-compare, so nothing is undecided; nothing counted"
    bases = [r.baseline for r in map(Result.from_dict, records.values()) if r.baseline is not None]
    if not bases:
        return "count-undecided: no test has a baseline entry to be undecided against; nothing counted"
    if not any(b.counters is not None for b in bases):
        return ("count-undecided: the baseline holds no counters to judge by; record them first "
                "(--gpuperf-counters --gpuperf-save); nothing counted")
    return None


def undecided_tests(records: Mapping[str, dict[str, Any]]) -> list[str]:
    """The timed tests that time could not decide, or read slower, whose baseline entry holds
    counters to judge them by (a test counted already has its counters' words)."""
    out = []
    for nodeid, record in records.items():
        result = Result.from_dict(record)
        base = result.baseline
        if (result.judgement is not None and result.counters is None and base is not None
                and base.counters is not None and (undecided_by_time(result) or result.judged.verdict == "slower")):
            out.append(nodeid)
    return sorted(out)


def counting_devices(device_index: int | None, controller: bool, workers: int, gpus: int) -> list[int | None]:
    """The GPUs to count on, one process each: those pytest-xdist's workers timed on (worker k on GPU
    k), or [None] (the GPU the user's arguments pick) for one process, or where every worker timed on
    the GPU --gpuperf-device named."""
    if not controller or device_index is not None:
        return [None]
    used = min(workers, gpus)
    return list(range(used)) if used > 1 else [None]


def rejudged(record: dict[str, Any], counters: Counters, l2_bytes: int | None, threshold: float) -> dict[str, Any]:
    """The record with `counters`, judged again against its baseline entry as it was when timed: at its
    threshold (`threshold` where it names none) and on its median (a recording's `history` holds the
    first run's median, the judged one is the fastest), with its declared bytes held against the DRAM
    bytes moved."""
    result = Result.from_dict(record)
    result.counters = counters
    result.warnings = with_declared_note(result.warnings, result.bytes, counters, l2_bytes)
    held_to = result.threshold if result.threshold is not None else threshold
    result.judgement = judge(result.baseline, replace(result, history=None), held_to).judgement()
    return {**record, **result.to_dict()}


def count_undecided(records: dict[str, dict[str, Any]], run: Callable[..., Any], args: Sequence[str], cwd: Path,
                    xdist: bool, devices: Sequence[int | None], say: Callable[[str], None], threshold: float,
                    l2_bytes: int | None = None) -> Recount:
    """Count the undecided tests of `records` (test id -> record, updated in place with their
    counters and new judgements), one counting process per device of `devices` (counting_devices)
    at once, each given its part of the tests, split by recorded measuring time. `run` is
    measure.counters.run_counting; `threshold` the session's, for a record that names none. A
    process that fails costs only its own tests' counters, in one line."""
    from ..measure.counters import CounterRun

    recount = Recount(undecided_tests(records))
    if not recount.asked:
        return recount
    costs = {nodeid: records[nodeid].get("wall_s") for nodeid in recount.asked}
    parts = [p for p in partition(recount.asked, costs, max(1, min(len(devices), len(recount.asked)))) if p]
    args = without_options(args, values=(SHARD_OPTION,))
    lock = threading.Lock()

    def said(line: str) -> None:  # the processes' threads share the terminal
        with lock:
            say(line)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpuperf-undecided-") as folder:

        def one(index: int) -> tuple[CounterRun, str | None]:
            device = devices[index]
            try:
                plan = Path(folder) / f"plan-{index}.json"
                Plan(select=parts[index]).write(plan)
                extra = [f"--gpuperf-ab-plan={plan}"] + ([f"--gpuperf-device={device}"] if device is not None else [])
                where = f" on GPU {device}" if device is not None else ""
                return run(args, cwd, xdist, said, extra=extra,
                           when=f"after timing, {plural(len(parts[index]), 'test')}{where}"), None
            except Exception as exc:  # CounterError names cause and fix; anything else must not lose the results
                return CounterRun(), f"no counters: {exc}"

        with ThreadPoolExecutor(max_workers=len(parts)) as pool:
            for counted, problem in pool.map(one, range(len(parts))):
                recount.counters.update(counted.counters)
                recount.counted_s += counted.counted_s
                recount.warm_s += counted.warm_s
                if problem:
                    recount.problems.append(problem)
    recount.seconds, recount.processes = time.perf_counter() - started, len(parts)
    for nodeid, counters in recount.counters.items():
        if nodeid in records:
            before = records[nodeid]
            records[nodeid] = rejudged(before, counters, l2_bytes, threshold)
            if records[nodeid].get("counter_verdict") == MORE and records[nodeid].get("regression") \
                    and not before.get("regression"):
                recount.more_work.append(nodeid)
            if records[nodeid].get("verdict") == "slower" and records[nodeid].get("counter_verdict") == SAME:
                recount.slower_same_work.append(nodeid)
    return recount
