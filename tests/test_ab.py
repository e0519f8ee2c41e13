"""`gpuperf ab`: two revisions of a tiny git repository, measured in alternating pytest processes
(base, head, head, base), undecided tests measured again, the base worktree removed afterwards."""
from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gpuperf import ab, cli
from pytest_gpuperf import ab_budget, ab_process
from pytest_gpuperf.ab_budget import Budget, within
from pytest_gpuperf.core.records import Entry
from pytest_gpuperf.core.versions import TIMING_VERSION
from pytest_gpuperf.store import results as results_store
from pytest_gpuperf.store.plan import Plan
from typed import result

pytest_plugins = ["pytester"]

SPIN = """
import time

DELAY = {delay}


def spin():
    end = time.perf_counter() + DELAY
    while time.perf_counter() < end:
        pass


def test_spin(gpu_benchmark):
    gpu_benchmark(spin)


def test_other(gpu_benchmark):
    gpu_benchmark(lambda: None)
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    """A repository whose committed test spins 2 ms (HEAD); the working tree is left to each test."""
    root = pytester.path
    git(root, "init", "-q")
    git(root, "config", "user.email", "ci@example.com")
    git(root, "config", "user.name", "ci")
    (root / "test_spin.py").write_text(SPIN.format(delay=0.002))
    # a checkout with its own copy of the plugin on pytest's pythonpath (as this repository is): the
    # installed plugin must still be the one that runs
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    (root / "pytest_gpuperf").mkdir()
    (root / "pytest_gpuperf" / "__init__.py").write_text("raise ImportError('the checkout copy was imported')\n")
    git(root, "add", "test_spin.py", "pyproject.toml", "pytest_gpuperf")
    git(root, "commit", "-q", "-m", "base")
    return root


def worktrees(repo: Path) -> int:
    return git(repo, "worktree", "list").count("\n")


def test_a_real_slowdown_in_the_working_tree_fails(repo: Path, capsys) -> None:
    (repo / "test_spin.py").write_text(SPIN.format(delay=0.008))  # 4x slower, not committed
    code = cli.main(["ab", "HEAD", "--rounds", "2", "--budget", "none", "--json", str(repo / "ab.json"), "--markdown",
                     str(repo / "ab.md"), "--", "-q", "-p", "no:cacheprovider", "-o", "gpuperf_budget=0.05",
                     "test_spin.py::test_spin"])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert "round 1, base (HEAD" in out and "round 1, head (working tree)" in out
    assert "REGRESSION test_spin.py::test_spin" in out and "slower" in out
    assert "4 pytest processes" in out  # a slower verdict is confirmed in a second round (head, then base)
    # where each side's time went: its measurements, and the rest of its processes
    assert re.search(r"gpuperf: [\d.]+ s in the base's 2 processes: 2 measurements [\d.]+ s \(first calls", out)
    assert re.search(r"gpuperf: [\d.]+ s in the head's 2 processes: 2 measurements .*outside measurements", out)
    doc = json.loads((repo / "ab.json").read_text())
    record = doc["benchmarks"][0]["extra_info"]
    assert record["verdict"] == "slower" and len(record["history"]) == len(record["baseline_history"]) == 2
    assert "slower" in (repo / "ab.md").read_text()
    assert worktrees(repo) == 1  # the base checkout is gone


def fake_runner(medians: dict[str, dict[str, float]], calls: list, thresholds: dict[str, float] | None = None,
                method: str = "events", instructions: dict[str, dict[str, int]] | None = None,
                peaks: dict[str, dict[str, int | list[int]]] | None = None) -> ab.Runner:
    """A pytest that 'measures' each test at a fixed median per side (told apart by its directory),
    honouring the plan's selection, and records what it was asked; with --gpuperf-counters, each
    test's `instructions` on that side; each test's peak memory in `peaks` (a list: one per process)."""

    def run(args: list[str], cwd: Path, log: Path) -> int:
        side = "head" if (cwd / "HEAD_MARK").exists() else "base"
        index = sum(c[0] == side for c in calls)  # this side's process number: a list gives one median each
        json_path = Path(next(a for a in args if a.startswith("--gpuperf-json=")).split("=", 1)[1])
        plan_arg = next((a for a in args if a.startswith("--gpuperf-ab-plan=")), None)
        plan = Plan.read(Path(plan_arg.split("=", 1)[1])) if plan_arg else Plan()
        ids = [i for i in (plan.select if plan.select is not None else sorted(medians[side])) if i in medians[side]]
        calls.append((side, list(ids), dict(plan.methods)))
        median = {i: m[index] if isinstance(m, list) else m for i, m in medians[side].items()}
        if not ids:  # pytest, asked for tests this checkout does not have
            log.write_text("ERROR: file or directory not found: test_new.py\n")
            return 4
        results = [{"nodeid": i, "name": i, "param": "", "group": "g", "median_ms": median[i],
                    "noise": 0.001, "samples": 100, "ci_ms": [median[i] * 0.999, median[i] * 1.001],
                    "method": method, "cache": "cold", "timing": TIMING_VERSION,
                    "threshold": (thresholds or {}).get(i, 0.05)} for i in ids]
        for r in results:
            peak = (peaks or {}).get(side, {}).get(r["nodeid"])
            r["peak_memory_bytes"] = peak[index] if isinstance(peak, list) else peak
        if "--gpuperf-counters" in args:
            for r in results:
                r["counters"] = {"instructions": [(instructions or {})[side][r["nodeid"]]]}
        results_store.write_json(json_path, [result(r) for r in results], {"key": "sim"}, {}, "2026-11-25T00:00:00")
        log.write_text(f"{len(ids)} passed\n")
        return 0

    return run


def test_rounds_alternate_and_only_undecided_tests_run_again(repo: Path) -> None:
    """base, head, then head, base and base, head for the undecided only; a slowdown stands once
    each side has measured it CONFIRMING_ROUNDS times."""
    (repo / "HEAD_MARK").write_text("")  # untracked: the base checkout has no such file
    medians = {"base": {"t::same": 1.0, "t::slow": 1.0, "t::noisy": 1.0},
               "head": {"t::same": 1.0, "t::slow": 1.2, "t::noisy": 1.0}}
    calls: list = []
    lines: list[str] = []
    run = ab.AbRun(["-q"], rounds=3, runner=fake_runner(medians, calls), say=lines.append)
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert [c[0] for c in calls] == ["base", "head", "head", "base", "base", "head"]
    assert calls[0][1] == calls[1][1] == ["t::noisy", "t::same", "t::slow"]  # round 1: everything
    assert calls[2][1] == calls[4][1] == ["t::slow"]  # rounds 2 and 3: the slowdown, to confirm it
    assert calls[0][2] == {} and calls[1][2] == {"t::noisy": "events", "t::same": "events", "t::slow": "events"}
    assert {k: v.time for k, v in verdicts.items()} == {"t::same": "same", "t::slow": "slower", "t::noisy": "same"}
    assert len(head.rounds) == 3 and "t::same" not in head.rounds[1]
    assert "gpuperf ab: after round 1: 1 slower, 2 same" in lines
    assert ab.report(verdicts, base, head, say=lines.append) == 1
    assert any("6 pytest processes" in line for line in lines)
    assert worktrees(repo) == 1


def test_count_undecided_counts_what_time_left_open_and_more_work_fails(repo: Path) -> None:
    """--count-undecided: after the rounds, one more process a side counts the tests time left open
    (0.3 µs calls, unsure for good) and the changed one, times them once more, and judges again: the
    tiny call whose code does 20% more instructions fails by its counters; the other reads the same
    work; the slowdown is said to be more work too; a test time decided is not counted."""
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::same": 1.0, "t::slow": 1.0, "t::tiny": 0.0003, "t::tiny_more": 0.0003},
               "head": {"t::same": 1.0, "t::slow": 1.2, "t::tiny": 0.0003, "t::tiny_more": 0.0003}}
    instructions = {"base": {"t::slow": 900_000, "t::tiny": 50_000, "t::tiny_more": 50_000},
                    "head": {"t::slow": 1_200_000, "t::tiny": 50_000, "t::tiny_more": 60_000}}
    calls: list = []
    lines: list[str] = []
    run = ab.AbRun(["-q"], rounds=3, runner=fake_runner(medians, calls, instructions=instructions),
                   say=lines.append, count_undecided=True)
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert [c[0] for c in calls] == ["base", "head", "head", "base", "base", "head", "head", "base"]
    assert calls[6][1] == calls[7][1] == ["t::slow", "t::tiny", "t::tiny_more"]  # counted, and timed once more
    assert "gpuperf ab: counting 3 tests that time left open or read changed, then timing them once more" in lines
    assert verdicts["t::tiny"].time == "unsure" and verdicts["t::tiny"].counters == "same"
    assert verdicts["t::tiny_more"].time == "unsure" and verdicts["t::tiny_more"].counters == "more"
    assert verdicts["t::slow"].time == "slower" and verdicts["t::slow"].counters == "more"
    assert verdicts["t::same"].counters is None and len(head.rounds) == 4
    assert "gpuperf ab: after counting: 1 slower, 2 unsure, 1 same; counters: 2 more work, 1 same work" in lines
    said: list[str] = []
    assert ab.report(verdicts, base, head, say=said.append, markdown_path=repo / "ab.md") == 1
    assert any(line.startswith("gpuperf ab: 2 tests undecided by time; counters judged 3 tests") for line in said)
    quiet = ab.AbRun(["-q"], rounds=1, runner=fake_runner(medians, [], instructions=instructions), say=[].append)
    assert "counters judged 3 tests (2 more work, 1 same work)" in (repo / "ab.md").read_text()
    plain, *sides = ab.compare_revisions(quiet, repo, "HEAD")  # one round, nothing counted
    lines.clear()
    assert ab.report(plain, *sides, say=lines.append, markdown_path=repo / "plain.md") == 1
    assert any("undecided by time: gpuperf ab --count-undecided decides them" in line for line in lines)
    assert "gpuperf ab --count-undecided decides them by hardware counters" in (repo / "plain.md").read_text()


def test_count_undecided_also_counts_a_same_that_could_not_see_its_threshold() -> None:
    """A 3 µs call held to 1% reads `same` at a bound of 1.56% (its threshold raised to the smallest
    meaningful change, 1.67%): it could not see the 1% it asked for, so it is counted, as the report
    calls it `same?`; a 1 ms call at 5% whose bound is 1% decided, and is not."""
    records = {"t::tiny": result({"nodeid": "t::tiny", "median_ms": 0.003, "threshold": 0.01}),
               "t::big": result({"nodeid": "t::big", "median_ms": 1.0, "threshold": 0.05})}
    base, head = (ab.Side(label, label, Path("."), rounds=[records]) for label in ("base", "head"))
    judged = ab.judge_sides(base, head)
    verdicts = {"t::tiny": replace(judged["t::tiny"], time="same", noise_bound=0.0156, threshold=0.0167),
                "t::big": replace(judged["t::big"], time="same", noise_bound=0.01, threshold=0.05)}
    assert ab.left_open(verdicts, base, head) == ["t::tiny"]


def test_count_undecided_with_a_spent_budget_and_a_failed_count(repo: Path) -> None:
    """Unsure tests the budget left out are counted and timed once more, so their verdicts no longer
    say they were not measured again. A counting process that fails leaves the timed rounds' verdicts
    and says so; the A/B still ends with its exit status."""
    (repo / "HEAD_MARK").write_text("")
    medians = {side: {"t::tight": 1.0, "t::tiny": 0.0003} for side in ("base", "head")}
    instructions = {side: {"t::tight": 900_000, "t::tiny": 50_000} for side in ("base", "head")}
    lines: list[str] = []
    runner = fake_runner(medians, [], thresholds={"t::tight": 0.01}, instructions=instructions)
    run = ab.AbRun(["-q"], rounds=3, runner=runner, say=lines.append, count_undecided=True, budget=Budget.parse("1x"))
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert any("1 unsure test not measured again: the budget" in line for line in lines)  # t::tight
    assert len(head.rounds) == 2 and {v.counters for v in verdicts.values()} == {"same"}
    assert not any(v.message.endswith(ab_budget.LEFT_OUT) for v in verdicts.values())

    def failing(args: list[str], cwd: Path, log: Path) -> int:
        if "--gpuperf-counters" in args:
            log.write_text("CUDA error: out of memory\n")
            return 3
        return runner(args, cwd, log)

    lines.clear()
    run = ab.AbRun(["-q"], rounds=3, runner=failing, say=lines.append, count_undecided=True, budget=Budget.parse("1x"))
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert verdicts["t::tight"].message.endswith(ab_budget.LEFT_OUT)  # not measured again, still
    assert len(base.rounds) == len(head.rounds) == 1 and len(base.process_seconds) == 1
    assert {v.time for v in verdicts.values()} == {"unsure"} and all(v.counters is None for v in verdicts.values())
    assert any("(the counting round; the report holds the rounds before it); the verdicts stand on the timed rounds"
               in line for line in lines)
    assert ab.report(verdicts, base, head, say=lines.append) == 0


def test_unsure_tests_more_rounds_could_not_decide_are_not_measured_again(repo: Path) -> None:
    """After round 1 an unsure test runs again only where its noise bound, projected to the rounds
    left, could still decide it: a 1 ms call held to 1% (its bound shrinks within it) and a 0.3 µs
    call that moved 45% (past the projected bound), not a 0.3 µs call that did not move (noise beyond
    its threshold at any round count allowed)."""
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::tight": 1.0, "t::tiny": 0.0003, "t::tiny_moved": 0.0003},
               "head": {"t::tight": 1.0, "t::tiny": 0.0003, "t::tiny_moved": 0.000435}}
    calls: list = []
    lines: list[str] = []
    run = ab.AbRun(["-q"], rounds=3, runner=fake_runner(medians, calls, thresholds={"t::tight": 0.01}),
                   say=lines.append)
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert "gpuperf ab: after round 1: 3 unsure" in lines
    assert calls[2][1] == ["t::tight", "t::tiny_moved"]
    assert "gpuperf ab: 1 unsure test not measured again: noise beyond its threshold even at 3 rounds a side" in lines
    assert verdicts["t::tight"].time == "same" and verdicts["t::tiny"].time == "unsure"
    assert verdicts["t::tiny_moved"].time == "slower" and base.measured()["t::tiny"] == 1


def test_a_spent_budget_drops_unsure_tests_but_still_confirms_a_change(repo: Path) -> None:
    """--budget 1x is spent by round 1 (two processes): the unsure test a later round would have
    measured again stays unsure, and says why; the slowdown is still confirmed over three rounds."""
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::tight": 1.0, "t::slow": 1.0}, "head": {"t::tight": 1.0, "t::slow": 1.2}}
    calls: list = []
    lines: list[str] = []
    run = ab.AbRun(["-q"], rounds=3, runner=fake_runner(medians, calls, thresholds={"t::tight": 0.01}),
                   say=lines.append, budget=Budget.parse("1x"))
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert [c[1] for c in calls[2:]] == [["t::slow"]] * 4
    assert verdicts["t::tight"].time == "unsure" and verdicts["t::slow"].time == "slower"
    assert verdicts["t::tight"].message.endswith("; not measured again: the --budget was spent")
    assert "--budget" not in verdicts["t::slow"].message
    left_out = [line for line in lines if "not measured again: the budget" in line]
    assert len(left_out) == 1 and left_out[0].startswith("gpuperf ab: 1 unsure test not measured again: the budget "
                                                         "(1x a plain run, ")
    assert len(base.process_seconds) == len(head.process_seconds) == 3
    ab.report(verdicts, base, head, say=lines.append, markdown_path=repo / "ab.md")
    assert "gpuperf ab: 1 unsure test not measured again: the --budget was spent" in lines
    assert "**1 unsure test not measured again: the --budget was spent**" in (repo / "ab.md").read_text()


def test_a_test_the_budget_left_out_is_never_measured_again(repo: Path, monkeypatch) -> None:
    """Left out after round 1, an unsure test does not return in round 3 when the budget has room
    again: measured in rounds 1 and 3 only, a `slower` would stand on two rounds a side."""
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::u": 1.0, "t::slow": 1.0}, "head": {"t::u": [1.012, 1.012, 1.012], "t::slow": 1.2}}
    calls: list = []
    rooms = iter([False, True])  # no room after round 1, room after round 2
    real = ab_budget.within

    def within(select, required, left_s, fixed_s, cost_s):
        return real(select, required, 1e9 if next(rooms) else -1.0, fixed_s, cost_s)

    monkeypatch.setattr(ab_budget, "within", within)
    run = ab.AbRun(["-q"], rounds=3, runner=fake_runner(medians, calls, thresholds={"t::u": 0.01}),
                   say=lambda line: None, budget=Budget.parse("1x"))
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert [c[1] for c in calls[2:]] == [["t::slow"]] * 4
    assert verdicts["t::u"].time == "unsure" and head.measured()["t::u"] == 1


def test_a_budget_with_room_changes_nothing(repo: Path) -> None:
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::tight": 1.0}, "head": {"t::tight": 1.0}}
    calls: list = []
    run = ab.AbRun(["-q"], rounds=3, runner=fake_runner(medians, calls, thresholds={"t::tight": 0.01}),
                   say=lambda line: None, budget=Budget.parse("10m"))
    verdicts, _, _ = ab.compare_revisions(run, repo, "HEAD")
    assert calls[2][1] == ["t::tight"] and verdicts["t::tight"].time == "same"


@pytest.mark.parametrize("text, limit_s, said", [("2.5x", 100.0, "2.5x a plain run"), ("600s", 600.0, "600 s"),
                                                ("10m", 600.0, "600 s"), (" 3X ", 120.0, "3x a plain run")])
def test_a_budget_is_a_multiple_of_a_plain_run_or_a_time(text, limit_s, said) -> None:
    budget = Budget.parse(text)
    assert budget.limit_s(40.0) == limit_s and str(budget) == said


def test_an_ab_is_held_to_2_5x_a_plain_run_unless_told_otherwise(repo: Path, monkeypatch) -> None:
    """The CLI's default budget is 2.5x (round 1 is 2x); `--budget none` lifts it, in any case."""
    budgets: list = []

    def compare(run, cwd, base):
        budgets.append(run.budget)
        raise ab.AbError("stop here")

    monkeypatch.chdir(repo)
    monkeypatch.setattr(ab, "compare_revisions", compare)
    for extra in ([], ["--budget", "NONE"], ["--budget", "600s"]):
        cli.main(["ab", "HEAD", *extra])
    assert budgets == [Budget(2.5, True), None, Budget(600.0, False)]
    assert Budget.parse(" none ") is None


def _results(costs: dict, told: bool = True) -> dict:
    """Results of one process: each test's measuring time `wall_s` and, where `told`, its whole cost."""
    return {k: result({"nodeid": k, "wall_s": s / 2, "test_s": s if told else None}) for k, s in costs.items()}


def test_the_first_later_round_is_planned_with_what_round_1_cost_beyond_its_tests() -> None:
    """Round 1's processes (50 s each) spent 46 and 45 s in their tests: a later process is taken to cost
    the cheaper 4 s beyond them (not LATER_PROCESS_S), so 8 of the 1 s unsure tests fit in the 25 s that
    2.5x leaves. Results that do not say what each test cost in all leave the constant: none fits."""
    tests = {f"t::u{i}": 1.0 for i in range(12)}
    base_round = _results({"t::rest": 34.0}) | _results(tests)
    head_round = _results({"t::rest": 33.0}) | _results(tests)
    spent = ab_budget.Spent.of([([50.0], [base_round]), ([50.0], [head_round])])
    assert spent.first_beyond_s == (4.0, 5.0) and spent.later_s == ()
    kept, dropped, said = ab_budget.next_round(Budget.parse("2.5x"), spent, sorted(tests), set(), tests)
    # 2 x (4 + 8 x 1) = 24 of the 25 s left
    assert len(kept) == 8 and len(dropped) == 4 and "has 25 s left; --budget none measures them" in said
    untold = ab_budget.Spent.of([([50.0], [_results({"t::rest": 34.0} | tests, told=False)]),
                                 ([50.0], [_results({"t::rest": 33.0} | tests, told=False)])])
    assert untold.first_beyond_s is None
    assert ab_budget.next_round(Budget.parse("2.5x"), untold, sorted(tests), set(), tests)[0] == []


def test_a_round_that_more_rounds_may_follow_keeps_back_what_confirming_a_change_costs() -> None:
    """As above (25 s left, 4 s a later process beyond its tests), with one more round allowed after
    the planned one: 2 x 4 s are kept for confirming a change it finds, so 4 of the 1 s unsure tests
    fit in the 17 s (2 x (4 + 4) = 16), not 8; the line says what was kept."""
    tests = {f"t::u{i}": 1.0 for i in range(12)}
    spent = ab_budget.Spent.of([([50.0], [_results({"t::rest": 34.0} | tests)]),
                                ([50.0], [_results({"t::rest": 33.0} | tests)])])
    kept, dropped, said = ab_budget.next_round(Budget.parse("2.5x"), spent, sorted(tests), set(), tests, after=1)
    assert len(kept) == 4 and len(dropped) == 8
    assert "has 25 s left, 8 s of them kept for confirming a change; --budget none" in said


def test_a_plain_run_is_round_1s_faster_process() -> None:
    """Round 1's base process took 60 s (the first on a fresh host also measures the node gap), its head
    50 s: 2.5x is 125 s, not 137.5 s of their mean, so 15 s are left, and each later process is taken
    at 4 s beyond its tests: three of the 1 s unsure tests fit (2 x (4 + 3) = 14). Where the head
    adds a test, its process is the plain run, though the base's was faster."""
    tests = {f"t::u{i}": 1.0 for i in range(12)}
    spent = ab_budget.Spent.of([([60.0], [_results({"t::rest": 44.0} | tests)]),
                                ([50.0], [_results({"t::rest": 34.0} | tests)])])
    kept, dropped, said = ab_budget.next_round(Budget.parse("2.5x"), spent, sorted(tests), set(), tests)
    assert len(kept) == 3 and len(dropped) == 9
    assert "(2.5x a plain run, 125 s) has 15 s left" in said
    added = ab_budget.Spent.of([([50.0], [_results({"t::rest": 34.0} | tests)]),
                                ([60.0], [_results({"t::rest": 34.0, "t::new": 10.0} | tests)])])
    assert not added.same_tests and added.plain_s == 60.0 and spent.same_tests and spent.plain_s == 50.0


def test_round_1_beyond_its_tests_never_raises_a_later_process_above_the_constant() -> None:
    """Round 1 can pay what a later process does not (the node gap's first measurement: 15 s here), and
    tests timed side by side (pytest-xdist in the pytest arguments) add up to more than the process: the
    plan then takes LATER_PROCESS_S, not 20 s, and not 0 s."""
    tests = {f"t::u{i}": 1.0 for i in range(12)}
    slow_start = ab_budget.Spent.of([([50.0], [_results({"t::rest": 18.0} | tests)]),
                                     ([50.0], [_results({"t::rest": 20.0} | tests)])])
    assert slow_start.first_beyond_s == (20.0, 18.0)
    side_by_side = ab_budget.Spent.of([([50.0], [_results({"t::rest": 70.0} | tests)]),
                                       ([50.0], [_results({"t::rest": 33.0} | tests)])])
    assert side_by_side.first_beyond_s is None
    for spent in (slow_start, side_by_side):  # 2 x (12 + 0 x 1) = 24 of the 25 s left: no unsure test fits
        assert ab_budget.next_round(Budget.parse("2.5x"), spent, sorted(tests), set(), tests)[0] == []


def test_a_later_process_is_planned_with_the_first_call_that_moves_to_its_tests() -> None:
    """Round 2's processes (20 s each) spent 15 s in their tests, t::compiled paying the process's first
    torch.compile (3 s of its 4 s). Without it in round 3 that first call lands on another test: with
    20 s left each process is taken at 5 + 3 s, so two 1 s tests fit (2 x (8 + 2) = 20), not all four.
    Where t::compiled is a candidate, its own 4 s holds the first call (tests keep their order, so it
    pays again): each process is taken at 5 s, and the four 1 s tests fit, not t::compiled too."""
    tests = {f"t::u{i}": 1.0 for i in range(4)}
    later = _results({"t::compiled": 4.0, "t::rest": 7.0} | tests)
    later["t::compiled"] = replace(later["t::compiled"], first_call_s=3.0)
    spent = ab_budget.Spent.of([([50.0, 20.0], [_results({"t::rest": 45.0}), later]),
                                ([50.0, 20.0], [_results({"t::rest": 45.0}), later])])
    assert spent.later_s == (5.0, 5.0) and spent.total_s == 140.0
    assert spent.moved_first_call_s(sorted(tests)) == 3.0 and spent.moved_first_call_s(["t::compiled"]) == 0.0
    kept, dropped, _ = ab_budget.next_round(Budget.parse("160s"), spent, sorted(tests), set(), tests)
    assert kept == ["t::u0", "t::u1"] and dropped == ["t::u2", "t::u3"]
    costs = tests | {"t::compiled": 4.0}
    kept, dropped, _ = ab_budget.next_round(Budget.parse("160s"), spent, ["t::compiled", *sorted(tests)], set(), costs)
    assert kept == sorted(tests) and dropped == ["t::compiled"]  # 2 x (5 + 4) = 18; + 2 x 4 would be 26


def test_a_round_within_budget_keeps_changes_and_adds_the_cheapest_unsure_tests() -> None:
    cost = {"t::a": 5.0, "t::b": 1.0, "t::c": 2.0, "t::slow": 30.0}
    # two processes of 10 s each, the change's 30 s twice: 80 s; 20 s left for b and c (6 s), not a (10 s)
    assert within(["t::a", "t::b", "t::c", "t::slow"], {"t::slow"}, 90.0, 10.0, cost) == (
        ["t::b", "t::c", "t::slow"], ["t::a"])
    assert within(["t::a", "t::b"], set(), 19.0, 10.0, cost) == ([], ["t::a", "t::b"])  # no room for a process
    assert within(["t::a", "t::b"], set(), 22.0, 10.0, cost) == (["t::b"], ["t::a"])
    assert within(["t::slow"], {"t::slow"}, -5.0, 10.0, cost) == (["t::slow"], [])  # a change runs regardless


def test_a_change_that_later_rounds_do_not_repeat_is_not_a_verdict(repo: Path) -> None:
    """One head process reads a test 20% slower (and another 20% faster), the next two agree with
    the base: neither stands."""
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::a": 1.0, "t::b": 1.0}, "head": {"t::a": [1.2, 1.0, 1.0], "t::b": [0.8, 1.0, 1.0]}}
    calls: list = []
    lines: list[str] = []
    run = ab.AbRun(["-q"], rounds=3, runner=fake_runner(medians, calls), say=lines.append)
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert "gpuperf ab: after round 1: 1 slower, 1 faster" in lines
    assert len(head.rounds) == 3 and {v.time for v in verdicts.values()} <= {"same", "unsure"}
    assert ab.report(verdicts, base, head, say=lines.append) == 0


def test_a_peak_memory_change_is_confirmed_in_later_rounds_like_time(repo: Path) -> None:
    """The base's first process read t::a's peak 12 MiB low (one call's peak can differ between
    processes): memory `slower` after round 1, so t::a is measured again, and after round 2 the
    base's range of peaks holds the head's. The head's first process read t::c's 13 MiB high: after
    round 2 growth is judged on its lower middle peak, the base's. t::b's growth repeats in every round and fails."""
    (repo / "HEAD_MARK").write_text("")
    mib = 1 << 20
    medians = {side: {"t::a": 1.0, "t::b": 1.0, "t::c": 1.0} for side in ("base", "head")}
    peaks = {"base": {"t::a": [195 * mib, 207 * mib, 207 * mib], "t::b": 100 * mib, "t::c": 207 * mib},
             "head": {"t::a": 207 * mib, "t::b": 120 * mib, "t::c": [220 * mib, 207 * mib, 207 * mib]}}
    calls: list = []
    lines: list[str] = []
    run = ab.AbRun(["-q"], rounds=3, runner=fake_runner(medians, calls, peaks=peaks), say=lines.append)
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert [ids for _, ids, _ in calls] == [["t::a", "t::b", "t::c"]] * 4 + [["t::b"]] * 2
    assert "gpuperf ab: after round 1: 3 same, 3 with more peak memory" in lines
    assert {k: v.memory for k, v in verdicts.items()} == {"t::a": "same", "t::b": "slower", "t::c": "same"}
    assert base.combined()["t::a"].peak_memory_history == [195 * mib, 207 * mib]
    assert ab.report(verdicts, base, head, say=lines.append) == 1


def test_one_low_peak_among_two_rounds_is_no_shrinking() -> None:
    """With two rounds a side, the head's one low peak (12 MiB under the base's two) is no `faster`:
    shrinking is judged on the head's upper middle peak, growth on its lower one."""
    from pytest_gpuperf.core.verdict import judge

    mib = 1 << 20
    base = ab.combined([result({"median_ms": 1.0, "peak_memory_bytes": 207 * mib})] * 2)
    head = ab.combined([result({"median_ms": 1.0, "peak_memory_bytes": p * mib}) for p in (195, 207)])
    assert judge(base, head, 0.05).memory == "same" and judge(head, base, 0.05).memory == "same"
    lower = ab.combined([result({"median_ms": 1.0, "peak_memory_bytes": 180 * mib})] * 2)
    assert judge(base, lower, 0.05).memory == "faster"
    # a stored entry compared as the new side (gpuperf compare OLD NEW.yaml) grows by its largest peak
    entry = Entry.from_dict({"median_ms": 1.0, "peak_memory_bytes": 230 * mib,
                             "peak_memory_history": [200 * mib, 200 * mib, 230 * mib]})
    assert judge(result({"median_ms": 1.0, "peak_memory_bytes": 200 * mib}), entry, 0.05).memory == "slower"


def test_a_confirmed_change_runs_again_only_while_a_side_has_fewer_than_three_rounds() -> None:
    """Only a change still to confirm runs whatever the budget: t::a's peak-memory change, measured
    three times a side, joins the unsure tests (the budget may leave it out); t::b's, measured once,
    does not."""
    from pytest_gpuperf.core.verdict import Verdict

    record = result({"median_ms": 1.0})
    rounds = [{"t::a": record, "t::b": record}] + [{"t::a": record}] * 2
    base, head = (ab.Side(label, "r", Path("."), rounds=list(rounds)) for label in ("base", "head"))
    changed = Verdict("unsure", "slower", None, 0.1, 1.0, 1.0, 0.05, 0.1, "")
    assert ab.to_confirm({"t::a": changed, "t::b": changed}, base, head) == {"t::b"}
    assert ab.to_confirm({"t::a": replace(changed, memory="same")}, base, head) == set()


@pytest.mark.parametrize("rounds, after", [(2, [0]), (3, [1, 0]), (5, [1, 0])])
def test_a_budgeted_round_keeps_back_room_only_for_the_rounds_a_confirmation_needs(repo: Path, monkeypatch, rounds,
                                                                                   after) -> None:
    """A change found in round p needs CONFIRMING_ROUNDS - p more rounds, --rounds permitting: more
    rounds allowed never keep back more (t::slow reads 20% slower until confirmed)."""
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::slow": 1.0}, "head": {"t::slow": 1.2}}
    asked: list[int] = []

    def planned(budget, spent, select, required, cost_s, after=0):
        asked.append(after)
        return list(select), [], None

    monkeypatch.setattr(ab, "next_round", planned)
    run = ab.AbRun(["-q"], rounds=rounds, runner=fake_runner(medians, []), say=lambda line: None,
                   budget=Budget.parse("100x"))
    ab.compare_revisions(run, repo, "HEAD")
    assert asked == after


def test_a_process_whose_graph_timed_calls_all_read_apart_is_corrected(repo: Path) -> None:
    """The base's first process reads every graph-timed call 0.3 µs faster than its other two (as a
    whole process can on an H100): after three rounds that process's offset comes off, and the
    tests read `same` rather than `slower` or `unsure`."""
    (repo / "HEAD_MARK").write_text("")
    ids = [f"t::k{n}" for n in range(12)]
    medians = {"base": {i: [0.0017, 0.002, 0.002] for i in ids}, "head": {i: 0.002 for i in ids}}
    calls: list = []
    lines: list[str] = []
    run = ab.AbRun(["-q"], rounds=3, runner=fake_runner(medians, calls, method="graph"), say=lines.append)
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert "gpuperf ab: after round 1: 12 slower" in lines
    assert {v.time for v in verdicts.values()} == {"same"}
    assert base.offsets() == [pytest.approx(-0.0003), 0.0, 0.0] and head.offsets() == [0.0, 0.0, 0.0]
    assert ab.report(verdicts, base, head, say=lines.append) == 0
    assert any("base's graph-timed calls" in line and "round 1 -0.300 µs" in line for line in lines)
    assert verdicts["t::k0"].message.startswith("same") and "process offsets taken off" in verdicts["t::k0"].message
    assert base.combined()["t::k0"].history[0] == 0.0017  # what the JSON and the table show: as measured


def test_a_record_with_its_process_offset_taken_off_no_longer_claims_slow_replays() -> None:
    """The offset already holds what the process's slow graph replays cost (measure/replay_state.py);
    the verdict must not excuse the change by them a second time."""
    record = result({"median_ms": 0.0023, "method": "graph", "slow_replay_us": 0.18})
    less = ab._less(record, 0.0003)
    assert (less.stats.median_ms, less.method, less.slow_replay_us) == (pytest.approx(0.002), "graph", None)
    assert ab._less(record, 0.003) is record


def test_a_sides_slow_replay_reading_is_its_rounds_middle_one() -> None:
    """Later rounds often run in fresh processes: one slowed round of three does not make the side's
    pooled median a slowed one, two do."""
    def rounds(*slowed):
        return [result({"median_ms": 0.002, "method": "graph", "slow_replay_us": us}) for us in slowed]

    assert ab.combined(rounds(0.18, None, None)).slow_replay_us is None
    assert ab.combined(rounds(0.18, 0.17, None)).slow_replay_us == 0.17
    assert ab.combined(rounds(None)).slow_replay_us is None


def test_a_process_offset_never_makes_a_change_appear(repo: Path) -> None:
    """The head's first process reads the graph-timed calls 0.4 µs slow, but not t::mid, decided
    `same` in round 1 and never measured again: the offset does not flip it to `faster` (it is not
    one of the tests the offset was estimated from, and taking an offset off can only calm a
    verdict); a 0.3 µs call, unsure for good at three rounds, is measured once."""
    (repo / "HEAD_MARK").write_text("")
    ids = [f"t::k{n}" for n in range(12)]
    medians = {"base": {**{i: 0.002 for i in ids}, "t::mid": 0.005, "t::tiny": 0.0003},
               "head": {**{i: [0.0024, 0.002, 0.002] for i in ids}, "t::mid": [0.00505, 0.005, 0.005],
                        "t::tiny": 0.0003}}
    calls: list = []
    run = ab.AbRun(["-q"], rounds=3, runner=fake_runner(medians, calls, method="graph"), say=lambda line: None)
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert head.offsets() == [pytest.approx(0.0004), 0.0, 0.0] and not any(base.offsets())
    assert verdicts["t::mid"].time == "same" and {v.time for v in verdicts.values()} <= {"same", "unsure"}
    corrected = head.combined(head.offsets())
    assert corrected["t::mid"].history == [0.00505] and corrected["t::tiny"].history == [0.0003]
    assert corrected["t::k0"].history == [pytest.approx(0.002)] * 3
    assert ab.report(verdicts, base, head, say=lambda line: None) == 0


def _stored(repo: Path, entries: dict[str, dict] | str) -> Path:
    """The fake device's stored baseline (`baselines/sim.yaml`) holding `entries` (or that text),
    committed: `gpuperf ab` reads the base revision's copy. Entries are timed as fake_runner's results
    unless they say otherwise."""
    import yaml

    path = repo / "baselines" / "sim.yaml"
    path.parent.mkdir(exist_ok=True)
    text = entries if isinstance(entries, str) else yaml.safe_dump(
        {"schema_version": 3, "device": {"key": "sim"},
         "entries": {i: {"cache": "cold", "timing": TIMING_VERSION, **e} for i, e in entries.items()}},
        explicit_end=True)
    path.write_text(text)
    git(repo, "add", "baselines")
    git(repo, "commit", "-q", "-m", "baseline")
    return path


def test_a_graph_timed_tests_stored_recordings_widen_its_bound(repo: Path) -> None:
    """Both sides' three rounds agree within their sides, 5.6% apart (the head's processes all landed
    alike): `slower` from the rounds alone. With the test's stored recordings, which spread 5%
    between machines, it is `unsure`; an event-timed test's recordings are not used (its spread
    across machines is clocks and power, which both sides share), nor is a test with two."""
    (repo / "HEAD_MARK").write_text("")
    ids = ("t::graph", "t::events", "t::two")
    medians = {"base": {i: [0.00250, 0.00252, 0.00251] for i in ids},
               "head": {i: [0.00265, 0.00266, 0.00265] for i in ids}}
    spread = [0.00240, 0.00262, 0.00236, 0.00270, 0.00250]

    def compare(stored: bool, method: str, lines: list) -> dict:
        run = ab.AbRun(["-q"], rounds=3, runner=fake_runner(medians, [], method=method), say=lines.append,
                       baseline_dir=repo / "baselines" if stored else None)
        return ab.compare_revisions(run, repo, "HEAD")[0]

    path = _stored(repo, {"t::graph": {"median_ms": 0.0025, "method": "graph", "history": spread},
                          "t::events": {"median_ms": 0.0025, "method": "events", "history": spread},
                          "t::two": {"median_ms": 0.0025, "method": "graph", "history": spread[:2]}})
    assert {v.time for v in compare(False, "graph", []).values()} == {"slower"}
    lines: list[str] = []
    graph = compare(True, "graph", lines)
    assert graph["t::graph"].time == "unsure" and graph["t::two"].time == "slower"
    assert any("1 graph-timed entry of" in line and "sim.yaml holds 3 or more recordings" in line for line in lines)
    assert compare(True, "events", [])["t::events"].time == "slower"
    # measured another way (a warm cache) the recordings do not count
    _stored(repo, {"t::graph": {"median_ms": 0.0025, "method": "graph", "cache": "warm", "history": spread}})
    assert compare(True, "graph", [])["t::graph"].time == "slower"
    # the base revision's copy is read: one re-recorded in the working tree only does not widen the bound
    git(repo, "rm", "-q", str(path))
    git(repo, "commit", "-q", "-m", "no baseline")
    _stored(repo, {"t::graph": {"median_ms": 0.0025, "method": "graph", "history": spread}})
    git(repo, "reset", "-q", "--soft", "HEAD~1")
    git(repo, "reset", "-q", "baselines")
    lines = []
    assert compare(True, "graph", lines)["t::graph"].time == "slower" and path.exists()
    assert any("no stored baseline" in line and "judged from its rounds alone" in line for line in lines)


def test_an_unusable_stored_baseline_is_one_line_and_left_as_it_is(repo: Path) -> None:
    (repo / "HEAD_MARK").write_text("")
    path = _stored(repo, "entries: [unclosed\n")
    lines: list[str] = []
    medians = {"base": {"t::a": 0.002}, "head": {"t::a": 0.002}}
    run = ab.AbRun(["-q"], runner=fake_runner(medians, [], method="graph"), say=lines.append,
                   baseline_dir=repo / "baselines")
    verdicts, _, _ = ab.compare_revisions(run, repo, "HEAD")
    assert verdicts["t::a"].time == "same"
    assert [line for line in lines if "sim.yaml" in line] == [
        next(line for line in lines if "corrupt YAML" in line and line.endswith("judged without its recordings"))]
    assert path.read_text() == "entries: [unclosed\n"


def test_identical_revisions_stop_after_one_round(repo: Path) -> None:
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::a": 0.5, "t::b": 2.0}, "head": {"t::a": 0.5005, "t::b": 1.998}}
    calls: list = []
    run = ab.AbRun(["-q"], runner=fake_runner(medians, calls), say=lambda line: None)
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert len(calls) == 2 and {v.time for v in verdicts.values()} == {"same"}
    assert ab.report(verdicts, base, head, say=lambda line: None) == 0


@pytest.mark.parametrize("argv, words", [
    (["ab", "no-such-revision"], "is not a commit"),
    (["ab", "HEAD", "--rounds", "0"], "--rounds 0"),
    (["ab", "HEAD", "--budget", "soon"], "--budget soon"),
    (["ab", "HEAD", "--budget", "0x"], "--budget 0x"),
])
def test_bad_input_is_one_line_and_exit_2(repo: Path, monkeypatch, capsys, argv, words) -> None:
    monkeypatch.chdir(repo)
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and words in err and "Traceback" not in out + err
    assert len(err.strip().splitlines()) == 1
    assert worktrees(repo) == 1


def test_a_side_that_cannot_run_is_exit_2_naming_it(repo: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(repo)
    code = cli.main(["ab", "HEAD", "--", "-q", "--gpuperf-threshold=abc", "test_spin.py"])
    out, err = capsys.readouterr()
    assert code == 2 and "base (HEAD" in err and "gpuperf-threshold" in err
    assert worktrees(repo) == 1


def test_a_side_that_fails_in_a_later_round_still_reports_the_rounds_before(repo: Path, monkeypatch,
                                                                           capsys) -> None:
    """The head's second process crashes: the error names it and the round, and the table, JSON and
    Markdown of round 1 are still written (exit 2)."""
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::slow": 1.0, "t::same": 1.0}, "head": {"t::slow": 1.3, "t::same": 1.0}}
    calls: list = []
    fake = fake_runner(medians, calls)

    def crashing(args: list[str], cwd: Path, log: Path) -> int:
        if sum(c[0] == "head" for c in calls) == 1 and (cwd / "HEAD_MARK").exists():
            log.write_text("INTERNALERROR> ModuleNotFoundError: No module named 'x'\n")
            return 3
        return fake(args, cwd, log)

    run = ab.AbRun(["-q"], rounds=3, runner=crashing, say=lambda line: None)
    with pytest.raises(ab.AbIncomplete, match=r"head \(working tree\): pytest exited with status 3: INTERNALERROR.*"
                                              r"\(round 2; the report holds the rounds before it\)") as caught:
        ab.compare_revisions(run, repo, "HEAD")
    exc = caught.value
    assert len(exc.base.rounds) == len(exc.head.rounds) == 1 and exc.verdicts["t::same"].time == "same"
    assert worktrees(repo) == 1

    monkeypatch.setattr(ab, "compare_revisions", lambda *a, **k: (_ for _ in ()).throw(exc))
    monkeypatch.chdir(repo)
    code = cli.main(["ab", "HEAD", "--json", str(repo / "ab.json"), "--markdown", str(repo / "ab.md"), "--", "-q"])
    out, err = capsys.readouterr()
    assert code == 2 and "gpuperf ab: error: head (working tree)" in err and "round 2" in err
    assert "2 tests: " in out and "gpuperf ab: incomplete run: head (working tree)" in out
    assert "**incomplete run: head (working tree)" in (repo / "ab.md").read_text()
    doc = json.loads((repo / "ab.json").read_text())
    assert {b["name"] for b in doc["benchmarks"]} == {"t::slow", "t::same"}
    assert "round 2" in doc["machine_info"]["gpuperf_note"]


def test_a_base_failing_after_the_heads_round_leaves_both_sides_at_the_rounds_before(repo: Path) -> None:
    """Round 2 runs the head, then the base; the base crashes: the head's second round is set aside,
    so the verdicts and both sides stand as they were after round 1."""
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::a": 1.0}, "head": {"t::a": [1.3, 1.3]}}
    calls: list = []
    fake = fake_runner(medians, calls)

    def crashing(args: list[str], cwd: Path, log: Path) -> int:
        if len(calls) == 3:  # base, head, head: the base's second process
            log.write_text("Fatal Python error: Segmentation fault\n")
            return -11
        return fake(args, cwd, log)

    run = ab.AbRun(["-q"], rounds=3, runner=crashing, say=lambda line: None)
    with pytest.raises(ab.AbIncomplete, match=r"base \(HEAD .*exited with status -11.*round 2") as caught:
        ab.compare_revisions(run, repo, "HEAD")
    assert len(caught.value.base.rounds) == len(caught.value.head.rounds) == 1
    assert caught.value.head.combined()["t::a"].history == [1.3]


def test_sigterm_after_round_1_still_reports_and_writes_the_rounds_before(repo: Path, monkeypatch, capsys) -> None:
    """A CI job's time limit (SIGTERM) in the head's second process: the table, JSON and Markdown of
    round 1 are written, the base checkout is removed, and the exit status is 130."""
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::slow": 1.0, "t::same": 1.0}, "head": {"t::slow": 1.3, "t::same": 1.0}}
    calls: list = []
    fake = fake_runner(medians, calls)

    def cancelled(args: list[str], cwd: Path, log: Path) -> int:
        if len(calls) == 2:  # round 2's first process: the job is cancelled while it runs
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises here
        return fake(args, cwd, log)

    monkeypatch.setattr(ab, "AbRun", functools.partial(ab.AbRun, runner=cancelled))
    monkeypatch.chdir(repo)
    before = signal.getsignal(signal.SIGTERM)
    code = cli.main(["ab", "HEAD", "--json", str(repo / "ab.json"), "--markdown", str(repo / "ab.md"), "--", "-q"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_INTERRUPTED and len(calls) == 2
    assert "gpuperf ab: interrupted in round 2; the report holds the complete rounds" in err
    assert "2 tests: " in out and "incomplete run: interrupted in round 2" in out
    assert "**incomplete run: interrupted in round 2" in (repo / "ab.md").read_text()
    assert {b["name"] for b in json.loads((repo / "ab.json").read_text())["benchmarks"]} == {"t::slow", "t::same"}
    assert signal.getsignal(signal.SIGTERM) == before and worktrees(repo) == 1


def test_a_real_sigterm_in_round_2_reports_round_1_and_exits_130(repo: Path) -> None:
    """The command in a process of its own, with real pytest processes: SIGTERM while round 2 runs
    stops it, removes the worktree, and still writes round 1's verdicts."""
    (repo / "test_spin.py").write_text(SPIN.format(delay=0.02))  # 10x slower: round 2 confirms it
    logs = repo / "logs"
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "gpuperf"), "ab", "HEAD", "--budget", "none", "--json", "ab.json",
         "--logs", str(logs), "--", "-q", "-p", "no:cacheprovider", "-o", "gpuperf_budget=0.05",
         "test_spin.py::test_spin"], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (logs / "round2-head.log").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == cli.EXIT_INTERRUPTED, out + err
    assert "gpuperf ab: interrupted in round 2; the report holds the complete rounds" in err
    assert "test_spin" in out and "incomplete run: interrupted in round 2" in out
    record = json.loads((repo / "ab.json").read_text())["benchmarks"][0]["extra_info"]
    assert record["verdict"] in ("slower", "unsure") and len(record["history"]) == 1  # unsure: a loaded CPU
    assert worktrees(repo) == 1


def test_an_interrupt_between_rounds_says_after_which(repo: Path) -> None:
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::a": 1.0}, "head": {"t::a": 1.2}}

    def say(line: str) -> None:
        if "after round 1" in line:  # judged, before round 2 begins
            raise KeyboardInterrupt

    run = ab.AbRun(["-q"], rounds=3, runner=fake_runner(medians, []), say=say)
    with pytest.raises(ab.AbInterrupted, match=r"^interrupted after round 1; the report holds the complete rounds$"):
        ab.compare_revisions(run, repo, "HEAD")


def test_an_interrupt_in_round_1_leaves_nothing_to_report(repo: Path, monkeypatch, capsys) -> None:
    def interrupted(args: list[str], cwd: Path, log: Path) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(ab, "AbRun", functools.partial(ab.AbRun, runner=interrupted))
    monkeypatch.chdir(repo)
    code = cli.main(["ab", "HEAD", "--json", str(repo / "ab.json"), "--", "-q"])
    assert code == cli.EXIT_INTERRUPTED and not (repo / "ab.json").exists() and worktrees(repo) == 1


def test_logs_keeps_every_processs_files_and_refuses_a_folder_in_use(repo: Path, monkeypatch, capsys) -> None:
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::a": 1.0}, "head": {"t::a": 1.0}}
    monkeypatch.setattr(ab, "AbRun", functools.partial(ab.AbRun, runner=fake_runner(medians, [])))
    monkeypatch.chdir(repo)
    assert cli.main(["ab", "HEAD", "--logs", "ab-logs", "--", "-q"]) == 0
    kept = sorted(p.name for p in (repo / "ab-logs").iterdir())
    assert kept == ["round1-base.json", "round1-base.log", "round1-head.json", "round1-head.log",
                    "round1-head.plan.json"]
    assert "each pytest process's log, results JSON and plan: ab-logs" in capsys.readouterr().err
    assert cli.main(["ab", "HEAD", "--logs", "ab-logs", "--", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "gpuperf ab: --logs: ab-logs is not empty; give a new or empty folder"
    assert sorted(p.name for p in (repo / "ab-logs").iterdir()) == kept and worktrees(repo) == 1


def test_a_plan_runs_only_its_tests_and_a_bad_plan_names_the_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_two="def test_a(gpu_benchmark):\n    gpu_benchmark(abs, 1)\n\n"
                                 "def test_b(gpu_benchmark):\n    gpu_benchmark(abs, 2)\n")
    Plan(select=["test_two.py::test_b"], methods={"test_two.py::test_b": "events"}).write(pytester.path / "plan.json")
    result = pytester.runpytest("--gpuperf", "--gpuperf-no-compare", "-o", "gpuperf_budget=0.02",
                                "--gpuperf-ab-plan=plan.json")
    result.assert_outcomes(passed=1, deselected=1)
    (pytester.path / "bad.json").write_text("[1, 2]")
    result = pytester.runpytest("--gpuperf", "--gpuperf-ab-plan=bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-ab-plan: *bad.json: not a gpuperf ab plan*"])


def test_each_test_is_judged_at_its_own_threshold(repo: Path) -> None:
    """A marker's threshold (recorded in each result) decides, as it does under pytest --gpuperf."""
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {"t::compiled": 1.0, "t::plain": 1.0}, "head": {"t::compiled": 1.13, "t::plain": 1.13}}
    run = ab.AbRun(["-q"], runner=fake_runner(medians, [], {"t::compiled": 0.3}), say=lambda line: None)
    verdicts, _, _ = ab.compare_revisions(run, repo, "HEAD")
    assert verdicts["t::compiled"].time == "same" and verdicts["t::plain"].time == "slower"


def test_a_test_only_in_the_working_tree_is_new(repo: Path) -> None:
    (repo / "HEAD_MARK").write_text("")
    medians = {"base": {}, "head": {"t::new": 1.0}}
    lines: list[str] = []
    run = ab.AbRun(["-q", "test_new.py"], runner=fake_runner(medians, [], None), say=lines.append)
    verdicts, base, head = ab.compare_revisions(run, repo, "HEAD")
    assert verdicts["t::new"].time == "new" and any("none of these tests exist there" in line for line in lines)
    assert ab.report(verdicts, base, head, say=lines.append) == 0


def test_paths_inside_the_repository_are_made_relative_and_own_options_refused(repo: Path) -> None:
    sub = repo / "sub"
    sub.mkdir()
    args = ab.pytest_args_for(["-q", str(repo / "test_spin.py") + "::test_spin", "/elsewhere/x.py", "-k", "a"],
                              repo.resolve(), sub.resolve())
    assert args == ["-q", "../test_spin.py::test_spin", "/elsewhere/x.py", "-k", "a"]
    with pytest.raises(ab.AbError, match="--gpuperf-save: gpuperf ab sets it"):
        ab.pytest_args_for(["--gpuperf-save"], repo, repo)


def test_an_unwritable_output_is_refused_before_any_round(repo: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(repo)
    (repo / "afile").write_text("")
    code = cli.main(["ab", "HEAD", "--json", str(repo / "afile" / "x.json"), "--", "-q", "test_spin.py"])
    out, err = capsys.readouterr()
    assert code == 2 and "--json" in err and "round 1" not in out
    assert worktrees(repo) == 1


def test_failed_counts_add_failures_and_errors(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("== 2 passed, 1 failed, 3 errors in 1.0s ==\n")
    assert ab_process.failed_count(log) == 4


def test_a_test_failing_in_the_working_tree_is_named(repo: Path, capsys) -> None:
    """A failure gates (exit 1) and the report names the test: the rounds' logs are gone afterwards."""
    (repo / "test_spin.py").write_text(SPIN.format(delay=0.002) + "\n\ndef test_broken():\n    assert 1 == 2\n")
    code = cli.main(["ab", "HEAD", "--rounds", "1", "--", "-q", "-p", "no:cacheprovider", "-o", "gpuperf_budget=0.05",
                     "test_spin.py"])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert "gpuperf ab: in the working tree, 1 test failed: test_spin.py::test_broken" in out


def test_failed_tests_are_read_from_the_short_summary_only(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("FAILED printed by a test - not a summary line\n"
                   "=== short test summary info ===\n"
                   "FAILED test_a.py::test_x[a b] - AssertionError: no\n"
                   "ERROR test_a.py::test_y\n"
                   "== 1 failed, 1 error in 1.0s ==\n")
    assert ab_process.failed_tests(log) == ["test_a.py::test_x[a b]", "test_a.py::test_y"]


def test_a_sides_rounds_combine_their_throttle_reasons_and_clocks() -> None:
    """The verdict excuses a thermal slowdown only where the lower clock explains it: a side's
    record carries every round's reasons and their middle clock, not the last round's."""
    rounds = [result({"median_ms": 1.0, "throttle": ["sw_thermal"], "sm_clock_mhz": 1600}),
              result({"median_ms": 1.1, "throttle": [], "sm_clock_mhz": 1800}),
              result({"median_ms": 1.05, "throttle": ["sw_power_cap"], "sm_clock_mhz": 1700})]
    record = ab.combined(rounds)
    assert record.throttle == ["sw_power_cap", "sw_thermal"] and record.sm_clock_mhz == 1700
    assert record.history == [1.0, 1.1, 1.05]
    assert ab.combined([result({"median_ms": 1.0})]).sm_clock_mhz is None
