"""`gpuperf ab BASE -- <pytest args>`: a base revision and the working tree measured on one GPU in
alternating pytest processes, each test judged from its rounds (the recommended PR gate).

BASE is checked out with `git worktree` into a temporary folder. Round 1 runs every selected test
on each side (base first); later rounds run, in the other order (base, head, head, base, ...), only
the tests still `unsure` and the `slower` or `faster` ones (time or peak memory) that each side has
not yet measured CONFIRMING_ROUNDS times (unsure ones within a `Budget`: ab_budget.py), so that clocks, power and
placement fall on both sides alike (ab_gpus.py runs this on each GPU for its part of the tests).
With `count_undecided`, one more process a side then counts the tests time left open by hardware
counters before timing them once more, and every test is judged again with them.
Each side's medians, one per process, are compared by the same noise model as a baseline's recordings
(`core.noise`), with the prior for two sides measured on one machine. Both sides are measured by
the plugin installed in this environment: only the code under test differs.
"""
from __future__ import annotations

import collections
import contextlib
import datetime as _dt
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from .ab_budget import Budget, Spent, latest_cost_s, left_out_note, left_out_said, next_round
from .ab_checkout import AbError, base_checkout, git, in_base, pytest_args_for, rounds_folder
from .ab_process import PYTEST_NO_TESTS, PYTEST_RAN, Runner, failed_count, failed_tests, only_in_head, run_pytest
from .ab_stored import is_graph_timed, stored_history, stored_spreads
from .core.counters import merge_all
from .core.noise import OFFSET_MIN_ROUNDS, SAME_MACHINE, center, process_offsets
from .core.records import Entry, Measured, Method, Result
from .core.units import as_number, plural
from .core.verdict import (CHANGES, Verdict, asked_threshold, could_decide, is_regression, is_undecided,
                           judge, projected_bound, throttle_reasons)
from .store.plan import Plan
from .store.results import load_recording

#: Most pytest processes per side; every round after the first runs only the undecided tests.
DEFAULT_ROUNDS = 3
#: Failed tests the report names; more are counted.
NAMED_FAILURES = 10
#: What the report says counts the tests time left open.
COUNTING = "gpuperf ab --count-undecided"


class AbIncomplete(AbError):
    """A side that could not be measured after round 1: the verdicts of the rounds before it, and
    both sides, go with the error so that the report still shows and writes them."""

    def __init__(self, message: str, verdicts: dict[str, Verdict], base: Side, head: Side):
        super().__init__(message)
        self.verdicts, self.base, self.head = verdicts, base, head


class AbInterrupted(AbIncomplete):
    """Ctrl-C or SIGTERM (a CI job's time limit) after round 1: the report still shows and writes
    what the complete rounds decided, and the exit status says the run was cut short."""


@dataclass
class Side:
    """One side of the comparison: where its checkout lives and what each round measured."""

    label: str
    revision: str
    root: Path
    rounds: list[dict[str, Result]] = field(default_factory=list)
    failed: int = 0
    failed_tests: set[str] = field(default_factory=set)  # as pytest's short summary names them
    seconds: float = 0.0
    process_seconds: list[float] = field(default_factory=list)  # each of its own processes', as its rounds
    device: dict | None = None
    software: dict = field(default_factory=dict)
    gpu: str | None = None  # the GPU its processes ran on (CUDA_VISIBLE_DEVICES), where several are used
    #: Merged from one side's runs on several GPUs (`merged`): the parts, each with its own processes.
    parts: tuple[Side, ...] = ()

    @classmethod
    def merged(cls, parts: Sequence[Side]) -> Side:
        """One side of the parts of a run on several GPUs, whose tests are disjoint: its round k holds
        every part's round k. Offsets and judgements stay with each part (its own processes)."""
        first = parts[0]
        rounds = [{i: r for p in parts if k < len(p.rounds) for i, r in p.rounds[k].items()}
                  for k in range(max(len(p.rounds) for p in parts))]
        return cls(first.label, first.revision, first.root, rounds, failed=sum(p.failed for p in parts),
                   failed_tests=set().union(*(p.failed_tests for p in parts)), seconds=sum(p.seconds for p in parts),
                   device=next((p.device for p in parts if p.device), None),
                   software=next((p.software for p in parts if p.software), {}), parts=tuple(parts))

    @property
    def processes(self) -> int:
        """The pytest processes whose rounds the side holds."""
        return sum(p.processes for p in self.parts) if self.parts else len(self.rounds)

    def offsets(self) -> list[float]:
        """ms per call each round's graph-timed tests read above the side's typical round
        (`core.noise.process_offsets`)."""
        return process_offsets([{i: r.stats.median_ms for i, r in measured.items() if is_graph_timed(r)}
                                for measured in self.rounds])

    def measured(self) -> collections.Counter:
        """Test id -> how many of the side's rounds measured it."""
        return collections.Counter(i for measured in self.rounds for i in measured)

    def combined(self, offsets: Sequence[float] | None = None) -> dict[str, Result]:
        """Test id -> the side's rounds of it as one record (see `combined`). With `offsets` (one per
        round, `offsets()`), each is taken off the graph-timed tests the side measured in
        OFFSET_MIN_ROUNDS rounds or more (those it was estimated from; a test decided in round 1 keeps
        what it was judged on)."""
        rounds = self.rounds
        if offsets is not None:
            counts = self.measured()
            rounds = [{i: _less(r, offset) if offset and counts[i] >= OFFSET_MIN_ROUNDS and is_graph_timed(r) else r
                       for i, r in measured.items()} for measured, offset in zip(rounds, offsets)]
        ids = sorted(set().union(*rounds))
        return {i: combined([r[i] for r in rounds if i in r]) for i in ids}


def _less(record: Result, offset_ms: float) -> Result:
    """The record with its median less a process offset (unchanged where that would leave nothing).
    Where the process replayed graphs slower than the side's other rounds, the offset holds what that
    cost, so the record no longer claims it (slow_replay_us) and the verdict does not excuse it again."""
    median = record.stats.median_ms - offset_ms
    return replace(record, stats=replace(record.stats, median_ms=median), slow_replay_us=None) if median > 0 else record


@dataclass
class AbRun:
    """An A/B comparison: the pytest arguments, how many rounds at most, and how to run pytest."""

    pytest_args: list[str]
    rounds: int = DEFAULT_ROUNDS
    runner: Runner = run_pytest
    say: Callable[[str], None] = print
    #: Where the stored baselines live (`stored_spreads`); None: judge from the rounds alone.
    baseline_dir: Path | None = None
    #: Count hardware counters in each side's first round (--gpuperf-counters); counts repeat, so
    #: one pass a side is enough.
    counters: bool = False
    #: After the last round, count the tests time left open (and the changed ones) in one more process
    #: a side (`count_undecided`), not held to the budget; excludes `counters`.
    count_undecided: bool = False
    #: How long the A/B may run (--budget; the CLI's default: ab_budget.DEFAULT_BUDGET); None: no limit.
    budget: Budget | None = None
    #: Where every process's log, results JSON and plan are kept (--logs); None: a temporary folder.
    logs: Path | None = None

    def measure(self, side: Side, cwd: Path, work: Path, index: int, plan: Plan, count: bool = False) -> None:
        """One pytest process of `side`; its results become the side's next round. `count`: its tests
        are counted by hardware counters before they are timed (as in round 1 with `counters`)."""
        stem = f"round{index + 1}-{side.label}"
        json_path, log = work / f"{stem}.json", work / f"{stem}.log"
        args = [*self.pytest_args, "--gpuperf", "--gpuperf-no-compare", f"--gpuperf-json={json_path}"]
        if count or (self.counters and index == 0):
            args.append("--gpuperf-counters")
        if plan.select is not None or plan.methods:
            plan_path = work / f"{stem}.plan.json"
            plan.write(plan_path)
            args.append(f"--gpuperf-ab-plan={plan_path}")
        started = time.perf_counter()
        status = self.runner(args, cwd, log)
        seconds = time.perf_counter() - started
        side.seconds += seconds
        side.process_seconds.append(seconds)
        # the tests asked for are new (the base has none of them), or a GPU's part holds none of this side's
        if (side.label == "base" and only_in_head(status, log)) or (
                plan.select is not None and status == PYTEST_NO_TESTS):
            side.rounds.append({})
            self.say(f"gpuperf ab: round {index + 1}, {side.label} ({side.revision}): none of these tests exist there")
            return
        if status not in PYTEST_RAN or not json_path.exists():
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:] if log.exists() else []
            what = "collected no tests" if status == PYTEST_NO_TESTS else f"exited with status {status}"
            raise AbError(f"{side.label} ({side.revision}): pytest {what}: {' | '.join(tail) or 'no output'}")
        side.device, side.software, records = load_recording(json_path)
        side.rounds.append({r.id.nodeid: r for r in records if r.stats.median_ms})
        failed = failed_count(log) if status == 1 else 0
        side.failed = max(side.failed, failed)
        if failed:
            side.failed_tests.update(failed_tests(log))
        self.say(f"gpuperf ab: round {index + 1}, {side.label} ({side.revision}): {plural(len(records), 'result')} "
                 f"in {seconds:.0f} s" + (f", {failed} failed" if failed else ""))


def failures_text(side: Side) -> str:
    """'2 tests failed: a, b', naming up to NAMED_FAILURES of the tests any round of `side` failed."""
    names = sorted(side.failed_tests)
    if not names:
        return f"{plural(side.failed, 'test')} failed"
    more = f" and {len(names) - NAMED_FAILURES} more" if len(names) > NAMED_FAILURES else ""
    return f"{plural(len(names), 'test')} failed: {', '.join(names[:NAMED_FAILURES])}{more}"


def combined(records: list[Result]) -> Result:
    """A side's rounds of one test as one record: the last round's record with every round's median
    in `history` and their center as the median, every round's throttle reasons, their middle
    SM clock (the verdict weighs a thermal slowdown by it), their middle slow-replay reading
    (a round in a fresh process counting 0) and their middle peak memory, which stand for the side
    as its median does, and every round's peak in `peak_memory_history` (the range a base's is judged by)."""
    history = [r.stats.median_ms for r in records]
    peaks = [int(p) for p in (as_number(r.peak_memory_bytes) for r in records) if p is not None]
    clocks = [r.sm_clock_mhz for r in records if isinstance(r.sm_clock_mhz, int)]
    slowed = [as_number(r.slow_replay_us) or 0.0 for r in records]
    counted = merge_all([r.counters for r in records])  # only the rounds that counted carry them
    last = records[-1]
    return replace(last, history=history, stats=replace(last.stats, median_ms=center(history)),
                   throttle=sorted({t for r in records for t in throttle_reasons(r)}),
                   sm_clock_mhz=statistics.median_high(clocks) if clocks else None,
                   slow_replay_us=statistics.median_high(slowed) or None,
                   peak_memory_bytes=statistics.median_low(peaks) if peaks else last.peak_memory_bytes,
                   peak_memory_history=peaks or None, counters=counted)


#: How strongly a verdict claims something: a process offset may lower it, never raise it.
_CLAIM = {"same": 0, "unsure": 1, "slower": 2, "faster": 2}


def judge_sides(base: Side, head: Side, stored: Mapping[str, Entry] | None = None) -> dict[str, Verdict]:
    """Each test of either side judged from its rounds at its own threshold (marker, else the
    pytest arguments' --gpuperf-threshold, else the default) (test id -> Verdict). `stored`: the
    entries whose recordings pool into a test's spread (`stored_spreads`).

    Where a side has a process whose graph-timed calls all read apart (`Side.offsets`), the tests
    are judged again with those offsets taken off, and the weaker of the two verdicts stands: taking
    an offset off can turn an `unsure` into `same`, but cannot make a change appear. (If two of a
    side's three processes are the odd ones, the offset goes to the third, and the corrected side
    can read a change that is the processes' states, not the code.)"""
    stored = stored or {}
    verdicts = _judge(base.combined(), head.combined(), stored)
    base_offsets, head_offsets = base.offsets(), head.offsets()
    if any(base_offsets) or any(head_offsets):
        corrected = _judge(base.combined(base_offsets), head.combined(head_offsets), stored)
        for nodeid, v in corrected.items():
            if _CLAIM.get(v.time, 2) < _CLAIM.get(verdicts[nodeid].time, 2):
                verdicts[nodeid] = replace(v, message=f"{v.message}; with the process offsets taken off")
    return verdicts


def _judge(old: Mapping[str, Result], new: Mapping[str, Result], stored: Mapping[str, Entry]) -> dict[str, Verdict]:
    out = {}
    for nodeid in sorted(old.keys() | new.keys()):
        limit = asked_threshold(new.get(nodeid) or old[nodeid])
        base, now = old.get(nodeid), new.get(nodeid)
        related = stored_history(base, stored.get(nodeid)) if base is not None else []
        out[nodeid] = judge(base, now, limit, prior=SAME_MACHINE, related=related)
    return out


def first_methods(side: Side) -> dict[str, str]:
    """The timing method each test took in the side's first round (events or graph), for the others to use."""
    timed = (Method.EVENTS.value, Method.GRAPH.value)
    return {i: r.method for i, r in side.rounds[0].items() if r.method in timed}


#: Rounds a side measures a `slower` or `faster` test, `--rounds` permitting, before the verdict
#: stands. A few tiny kernels and power-capped matmuls move between processes far more than the
#: prior allows (docs/gate.md), and two rounds a side let such a test read a change that a third
#: round does not repeat.
CONFIRMING_ROUNDS = 3


def undecided(verdicts: dict[str, Verdict], base: Side, head: Side, rounds: int,
              stored: Mapping[str, Entry] | None = None) -> tuple[list[str], list[str]]:
    """(tests another round could still decide, unsure tests it could not). Measured again: the
    changes still to confirm (`to_confirm`), and `unsure` ones whose noise bound, projected to
    `rounds` a side, could still decide them (`could_decide`). The rest are unsure for good: noise
    beyond their threshold at every round count `--rounds` allows."""
    old, new = base.combined(), head.combined()
    confirm = to_confirm(verdicts, base, head)
    again, hopeless = [], []
    for k, v in sorted(verdicts.items()):
        if k in confirm:
            again.append(k)
        elif v.time == "unsure":
            decidable = k in old and k in new and could_decide(v, projected_bound(
                old[k], new[k], rounds, SAME_MACHINE, stored_history(old[k], (stored or {}).get(k))))
            (again if decidable else hopeless).append(k)
    return again, hopeless


def to_confirm(verdicts: Mapping[str, Verdict], base: Side, head: Side) -> set[str]:
    """The tests whose time or peak memory reads a change (`Verdict.changed`) that either side has
    measured fewer than CONFIRMING_ROUNDS times: they run again whatever the budget."""
    base_rounds, head_rounds = base.measured(), head.measured()
    return {k for k, v in verdicts.items() if v.changed and min(base_rounds[k], head_rounds[k]) < CONFIRMING_ROUNDS}


def counts_text(verdicts: dict[str, Verdict]) -> str:
    """'3 slower, 1 unsure, 40 same, 1 with more peak memory': the verdicts so far, so a run cut short
    still says something."""
    counts = collections.Counter(v.time for v in verdicts.values())
    memory = collections.Counter(v.memory for v in verdicts.values())
    return ", ".join([f"{counts[t]} {t}" for t in ("slower", "unsure", "faster", "same", "new", "missing") if counts[t]]
                     + [f"{memory[m]} with {word} peak memory" for m, word in (("slower", "more"), ("faster", "less"))
                        if memory[m]])


@dataclass(frozen=True)
class Checkout:
    """Where the two sides run: the repository, the directory `gpuperf ab` ran in (relative to the
    repository), BASE's worktree, and a scratch folder for the rounds' files."""

    repo: Path
    relative: Path
    revision: str
    commit: str
    base_root: Path
    work: Path
    baseline_dir: Path | None  # the stored baselines, as BASE holds them (`stored_spreads`)

    def sides(self, gpu: str | None = None) -> tuple[Side, Side]:
        return (Side("base", f"{self.revision} {self.commit[:10]}", self.base_root, gpu=gpu),
                Side("head", "working tree", self.repo, gpu=gpu))


@contextlib.contextmanager
def checkout(run: AbRun, cwd: Path, revision: str) -> Iterator[Checkout]:
    """BASE checked out beside the working tree for the time of the run (`base_checkout`); the
    pytest arguments made fit for both sides (`pytest_args_for`)."""
    repo = Path(git(["rev-parse", "--show-toplevel"], cwd)).resolve()
    relative = Path(cwd).resolve().relative_to(repo)
    run.pytest_args = pytest_args_for(run.pytest_args, repo, Path(cwd).resolve())
    with base_checkout(repo, revision) as (base_root, commit), rounds_folder(run.logs) as work:
        if not (base_root / relative).is_dir():
            raise AbError(f"{relative} does not exist at {revision} ({commit[:10]}): run gpuperf ab from a "
                          f"directory both revisions have")
        yield Checkout(repo, relative, revision, commit, base_root, work,
                       in_base(run.baseline_dir, cwd, repo, base_root))


def compare_revisions(run: AbRun, cwd: Path, revision: str) -> tuple[dict, Side, Side]:
    """Measure `revision` and the working tree in alternating rounds; returns the verdicts and both sides."""
    with checkout(run, cwd, revision) as co:
        base, head = co.sides()
        verdicts = alternate(run, co, base, head)
    return verdicts, base, head


def alternate(run: AbRun, co: Checkout, base: Side, head: Side, select: list[str] | None = None,
              spreads: Callable[[dict | None], dict[str, Entry]] | None = None) -> dict[str, Verdict]:
    """The rounds of one GPU: base and head in alternating processes, every round after the first
    only the undecided tests; returns the verdicts. `select`: the tests to run (None: all that the
    pytest arguments select). `spreads`: the stored entries for a device (default `stored_spreads`)."""
    spreads = spreads or (lambda device: stored_spreads(co.baseline_dir, device, run.say))
    verdicts: dict[str, Verdict] = {}
    stored: dict[str, Entry] | None = None
    given_up: set[str] = set()  # unsure tests more rounds could not decide (`undecided`)
    over_budget: set[str] = set()  # unsure tests --budget left out: never measured again after that
    plan = Plan(select=select)
    judged = started = 0  # the rounds `verdicts` were judged from; the rounds begun
    try:
        for index in range(max(run.rounds, 1)):
            started = index + 1
            _round(run, co, (base, head), index, plan, verdicts, judged)
            if stored is None:
                stored = spreads(head.device or base.device)
            verdicts = judge_sides(base, head, stored)
            judged = index + 1
            plan.select, hopeless = undecided(verdicts, base, head, run.rounds, stored)
            run.say(f"gpuperf ab: after round {index + 1}: {counts_text(verdicts)}")
            newly = [k for k in hopeless if k not in given_up]
            given_up.update(newly)
            if newly and index + 1 < run.rounds:
                run.say(f"gpuperf ab: {plural(len(newly), 'unsure test')} not measured again: noise beyond "
                        f"{'its' if len(newly) == 1 else 'their'} threshold even at {run.rounds} rounds a side")
            if run.budget is not None and plan.select and index + 1 < run.rounds:
                plan.select, dropped = _within_budget(run, [k for k in plan.select if k not in over_budget],
                                                      verdicts, base, head, _confirming_after(run.rounds, index))
                over_budget.update(dropped)
            if not plan.select:
                break
            if index + 1 < run.rounds:
                run.say(f"gpuperf ab: measuring {plural(len(plan.select), 'undecided test')} again")
        plan.select = left_open(verdicts, base, head) if run.count_undecided else []
        if plan.select:
            started = judged + 1
            verdicts, judged = _count_round(run, co, (base, head), plan, verdicts, judged, stored)
            if judged == started:
                over_budget -= set(plan.select)  # measured again after all
    except KeyboardInterrupt:
        if not verdicts:
            raise
        where = f"in round {started}" if started > judged else f"after round {judged}"
        raise AbInterrupted(f"interrupted {where}; the report holds the complete rounds",
                            left_out_said(verdicts, over_budget), _rounds_before(base, judged),
                            _rounds_before(head, judged)) from None
    return left_out_said(verdicts, over_budget)


def _round(run: AbRun, co: Checkout, sides: tuple[Side, Side], index: int, plan: Plan,
           verdicts: dict[str, Verdict], judged: int, count: bool = False, name: str | None = None) -> None:
    """Round `index + 1` (or `name`): a process of each side (base first in odd rounds). A failure once
    a round was judged is AbIncomplete, with the `judged` rounds before it."""
    base, head = sides
    for side in (sides if index % 2 == 0 else sides[::-1]):
        try:
            run.measure(side, side.root / co.relative, co.work, index, plan, count)
        except AbError as exc:
            if not verdicts:
                raise
            raise AbIncomplete(f"{exc} ({name or f'round {index + 1}'}; the report holds the rounds before it)",
                               verdicts, _rounds_before(base, judged), _rounds_before(head, judged)) from None
        if not plan.methods:  # every later process times each test as the base's first did
            plan.methods = first_methods(base)


def left_open(verdicts: Mapping[str, Verdict], base: Side, head: Side) -> list[str]:
    """The tests `count_undecided` counts: those time left open (`unsure`, or a `same` that could not
    see the threshold its test asked for, as the report's `same?`) and the ones time reads `slower`
    or `faster`, whose counters say whether the code or the machine moved."""
    old, new = base.combined(), head.combined()
    return sorted(k for k, v in verdicts.items() if v.time in ("unsure", *CHANGES)
                  or is_undecided(v.time, v.detectable, asked_threshold(new.get(k) or old[k])))


def _count_round(run: AbRun, co: Checkout, sides: tuple[Side, Side], plan: Plan, verdicts: dict[str, Verdict],
                 judged: int, stored: Mapping[str, Entry] | None) -> tuple[dict[str, Verdict], int]:
    """`count_undecided`'s round over `plan.select`: (the verdicts judged again, the rounds judged). A
    failed process leaves the verdicts of the timed rounds, and says why."""
    run.say(f"gpuperf ab: counting {plural(len(plan.select), 'test')} that time left open or read changed, "
            "then timing them once more")
    try:
        _round(run, co, sides, judged, plan, verdicts, judged, count=True, name="the counting round")
    except AbIncomplete as exc:
        for side in sides:  # the timed rounds stand; the time of every process still counts
            del side.rounds[judged:], side.process_seconds[judged:]
        run.say(f"gpuperf ab: {exc.args[0]}; the verdicts stand on the timed rounds")
        return verdicts, judged
    verdicts = judge_sides(*sides, stored)
    counted = [r for side in sides for r in side.rounds[-1].values() if r.counters is not None]
    run.say(f"gpuperf ab: after counting: {counts_text(verdicts)}; counters: {counters_text(verdicts)}"
            + ("" if counted else " (no process returned counters: its log says why; --logs keeps it)"))
    return verdicts, judged + 1


def counters_text(verdicts: Mapping[str, Verdict]) -> str:
    """'1 more work, 2 same work': what the counters said, where they judged a test."""
    from .report.rows import counter_words

    return counter_words(collections.Counter(v.counters for v in verdicts.values() if v.counters)) or "none judged"


def _within_budget(run: AbRun, select: list[str], verdicts: dict[str, Verdict], base: Side,
                   head: Side, after: int) -> tuple[list[str], list[str]]:
    """(the tests the next round measures within `run.budget`, those it leaves out): `ab_budget.next_round`,
    with `after` rounds that may follow it."""
    spent = Spent.of([(side.process_seconds, side.rounds) for side in (base, head)])
    cost_s = {k: latest_cost_s(k, [base.rounds, head.rounds]) for k in select}
    kept, dropped, note = next_round(run.budget, spent, select, to_confirm(verdicts, base, head) & set(select),
                                     cost_s, after)
    if note:
        run.say(note)
    return kept, dropped


def _confirming_after(rounds: int, index: int) -> int:
    """Rounds that may follow round `index + 2` to confirm a change it finds: every test still measured
    was measured in each round, so a change found in round p needs CONFIRMING_ROUNDS - p more."""
    return max(0, min(rounds, CONFIRMING_ROUNDS) - index - 2)


def _rounds_before(side: Side, index: int) -> Side:
    """The side as it stood after `index` complete rounds (a failed round leaves one side ahead);
    its time and failures still count every process it ran."""
    return replace(side, rounds=side.rounds[:index], process_seconds=side.process_seconds[:index])


def report(verdicts: dict[str, Verdict], base: Side, head: Side, *, width: int = 120,
           json_path: Path | None = None, markdown_path: Path | None = None,
           say: Callable[[str], None] = print, incomplete: str | None = None) -> int:
    """Print the verdict table and the cost, write the requested files; returns the exit status.
    `incomplete`: why the run stopped early, said under the table and in both files."""
    from .report.markdown import write_markdown
    from .report.rows import counters_line, time_line
    from .report.table import compare_lines
    from .store.results import write_json

    old, new = base.combined(), head.combined()
    say(f"gpuperf ab: {base.revision} -> {head.revision}")
    say("\n".join(compare_lines(verdicts, old, new, width=width)))
    processes = base.processes + head.processes
    say(f"gpuperf ab: {processes} pytest processes, {base.seconds + head.seconds:.0f} s (base {base.seconds:.0f} s, "
        f"head {head.seconds:.0f} s); rounds per side: {len(base.rounds)}")
    for part in (p for side in (base, head) for p in (side.parts or (side,))):
        moved = [f"round {n} {o * 1e3:+.3f} µs" for n, o in enumerate(part.offsets(), 1) if o]
        if moved:
            on = f" on GPU {part.gpu}" if part.gpu is not None else ""
            say(f"gpuperf ab: the {part.label}'s graph-timed calls{on} all read apart from its other rounds per call "
                f"({', '.join(moved)}); where taking that off calms a verdict, the calmer one stands")
    for side in (base, head):  # where the time went: measurements, and each process's own start-up and the rest
        records = [r for measured in side.rounds for r in measured.values()]
        processes = plural(side.processes, "process", "processes")
        say(time_line(records, side.seconds, f"in the {side.label}'s {processes}"))
    results = []
    for nodeid, record in new.items():
        v = verdicts[nodeid]
        base = Entry.of(old[nodeid]) if nodeid in old else None
        results.append(replace(record, baseline=base, judgement=v.judgement()))
    note = "; ".join(filter(None, [f"incomplete run: {incomplete}" if incomplete else None,
                                   left_out_note(verdicts)])) or None
    if note:
        say(f"gpuperf ab: {note}")
    work = counters_line(results, COUNTING)
    if work:
        say(work.replace("gpuperf:", "gpuperf ab:", 1))
    if json_path is not None:
        started = _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"
        write_json(json_path, results, head.device or {}, head.software, started, note=note)
    if markdown_path is not None:
        write_markdown(markdown_path, results, head.device or {}, head.software, note=note, counting=COUNTING)
    if head.failed:
        say(f"gpuperf ab: in the working tree, {failures_text(head)}")
    return 1 if head.failed or any(is_regression(v) for v in verdicts.values()) else 0
