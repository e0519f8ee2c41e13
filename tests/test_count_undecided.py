"""--gpuperf-count-undecided on the CPU, its counting processes faked: after timing, only the tests
time could not decide are counted, one process per GPU the run used, and judged again by their
counters; more work fails the session."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gpuperf.core.counters import Counters
from pytest_gpuperf.measure import counters as counting
from pytest_gpuperf.plugin import undecided
from pytest_gpuperf.store.plan import Plan

pytest_plugins = ["pytester"]

TEST = """
def work():
    return sum(range(2000))

def test_work(gpu_benchmark):
    assert gpu_benchmark(work) == sum(range(2000))

def test_plain():
    assert True
"""
FAST = ["--gpuperf-budget", "0.1", "-p", "no:randomly"]
NODE = "test_work.py::test_work"
#: A threshold no host-timed call can see (undecided by time), and one any can.
UNSEEABLE, SEEABLE = "--gpuperf-threshold=0.001%", "--gpuperf-threshold=90%"


def _counters(instructions: int) -> Counters:
    return Counters({"instructions": (instructions,), "dram_read_bytes": (4_000_000,),
                     "dram_write_bytes": (4_000_000,), "launches": (1,)})


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch):
    """A suite with a baseline that holds counters, and a faked counting process that returns
    `suite.instructions` and records what it was asked to count."""
    state = {"instructions": 1000, "calls": []}

    def fake(args, cwd, xdist, say, runner=None, work=None, extra=(), when="before timing"):
        plans = [Plan.read(Path(a.split("=", 1)[1])) for a in extra if a.startswith("--gpuperf-ab-plan=")]
        state["calls"].append({"when": when, "select": plans[0].select if plans else None, "extra": list(extra)})
        say(f"gpuperf: counting (faked) {when}")
        ids = plans[0].select if plans else [NODE]
        return counting.CounterRun({i: _counters(state["instructions"]) for i in ids}, 1.0, len(ids), None, 0.5, 0.25)

    monkeypatch.setattr(counting, "run_counting", fake)
    pytester.makepyfile(test_work=TEST)
    pytester.runpytest("--gpuperf", "--gpuperf-counters", "--gpuperf-save", *FAST).assert_outcomes(passed=2)
    state["calls"].clear()
    pytester.state = state
    return pytester


def test_only_what_time_could_not_decide_is_counted_after_timing(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--gpuperf", "--gpuperf-count-undecided", UNSEEABLE, "--gpuperf-json=r.json", *FAST)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    [call] = suite.state["calls"]
    assert call["select"] == [NODE] and call["when"].startswith("after timing, 1 test")
    result.stdout.fnmatch_lines(["*count-undecided: counted 1 of the 1 test time could not decide, after timing*"])
    extra = json.loads((suite.path / "r.json").read_text())["benchmarks"][0]["extra_info"]
    assert extra["counters"]["instructions"] == [1000] and extra["counter_verdict"] == "same"
    assert "counters same" in extra["message"]

    suite.state["calls"].clear()
    decided = suite.runpytest("--gpuperf", "--gpuperf-count-undecided", SEEABLE, *FAST)
    decided.assert_outcomes(passed=2)
    assert suite.state["calls"] == []
    decided.stdout.fnmatch_lines(["*count-undecided: time decided every test that has baseline counters*"])


def test_more_work_counted_after_timing_fails_the_session_and_names_the_test(suite: pytest.Pytester) -> None:
    suite.state["instructions"] = 1500
    result = suite.runpytest("--gpuperf", "--gpuperf-count-undecided", UNSEEABLE, "--gpuperf-json=r.json", *FAST)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 test did more work: test_work.py::test_work*", "*gpuperf: 1 regression against*"])
    extra = json.loads((suite.path / "r.json").read_text())["benchmarks"][0]["extra_info"]
    assert extra["counter_verdict"] == "more" and "instructions +50.0%" in extra["message"]


def test_counting_after_timing_needs_gpuperf_and_excludes_counting_before(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_work=TEST)
    alone = pytester.runpytest("--gpuperf-count-undecided")
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    alone.stderr.fnmatch_lines(["*--gpuperf-count-undecided: counters are judged beside time; add --gpuperf*"])
    both = pytester.runpytest("--gpuperf", "--gpuperf-counters", "--gpuperf-count-undecided")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    both.stderr.fnmatch_lines(["*--gpuperf-count-undecided: --gpuperf-counters already counts every test*"])


def _record(nodeid: str, verdict: str, detects: float, wall_s: float, counted: bool = False) -> dict:
    """A judged plain record against a baseline entry with counters."""
    base = {"median_ms": 1.0, "counters": _counters(1000).to_dict(), "history": [1.0, 1.0]}
    name = nodeid.split("::")[1]
    return {"nodeid": nodeid, "name": name, "param": "", "group": name, "median_ms": 1.0, "threshold": 0.05,
            "verdict": verdict, "detects": detects, "wall_s": wall_s, "baseline": base,
            "counters": _counters(1000).to_dict() if counted else None}


def test_the_undecided_are_split_over_the_gpus_by_recorded_time_and_a_refusal_is_one_line() -> None:
    records = {f"t.py::{n}": _record(f"t.py::{n}", v, d, w, c) for n, v, d, w, c in [
        ("a", "unsure", 0.09, 3.0, False), ("b", "same", 0.2, 2.0, False), ("c", "same", 0.01, 5.0, False),
        ("d", "unsure", 0.2, 1.0, True), ("e", "unsure", 0.2, 1.5, False)]}
    assert undecided.undecided_tests(records) == ["t.py::a", "t.py::b", "t.py::e"]  # c decided, d counted
    asked = []

    def run(args, cwd, xdist, say, extra=(), when=""):
        plan = Plan.read(Path(next(a for a in extra if a.startswith("--gpuperf-ab-plan=")).split("=", 1)[1]))
        device = next(a for a in extra if a.startswith("--gpuperf-device="))
        asked.append((device, plan.select))
        if device.endswith("=1"):
            raise counting.CounterError("no Nsight Compute: ncu is not on the PATH")
        return counting.CounterRun({i: _counters(1000) for i in plan.select})

    recount = undecided.count_undecided(records, run, ["t.py"], Path("."), True, [0, 1], lambda _: None, 0.05)
    assert sorted(asked) == [("--gpuperf-device=0", ["t.py::a"]), ("--gpuperf-device=1", ["t.py::b", "t.py::e"])]
    assert set(recount.counters) == {"t.py::a"} and records["t.py::a"]["counter_verdict"] == "same"
    assert records["t.py::b"].get("counter_verdict") is None
    assert "no counters: no Nsight Compute: ncu is not on the PATH" in recount.note()
