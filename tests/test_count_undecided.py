"""--gpuperf-count-undecided on the CPU, its counting processes faked: after timing, only the tests
time could not decide (and the slower ones) are counted, one process per GPU the run used, and
judged again by their counters; more work fails the session."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

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


def _spread_history(suite: pytest.Pytester) -> None:
    """The saved entry's recordings spread 4x: on a busy CPU time can then never call the test slower
    or faster, only unsure."""
    for path in (suite.path / "baselines").glob("*.yaml"):
        stored = yaml.safe_load(path.read_text())
        for entry in stored["entries"].values():
            entry["history"] = [entry["median_ms"] * f for f in (0.5, 1.0, 2.0)]
        path.write_text(yaml.safe_dump(stored, explicit_end=True))


def test_only_what_time_could_not_decide_is_counted_after_timing(suite: pytest.Pytester) -> None:
    original = {p: p.read_text() for p in (suite.path / "baselines").glob("*.yaml")}
    _spread_history(suite)
    result = suite.runpytest("--gpuperf", "--gpuperf-count-undecided", UNSEEABLE, "--gpuperf-json=r.json", *FAST)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    [call] = suite.state["calls"]
    assert call["select"] == [NODE] and call["when"].startswith("after timing, 1 test")
    result.stdout.fnmatch_lines(["*count-undecided: counted 1 of the 1 test time could not decide or read slower, after timing*"])
    extra = json.loads((suite.path / "r.json").read_text())["benchmarks"][0]["extra_info"]
    assert extra["counters"]["instructions"] == [1000] and extra["counter_verdict"] == "same"
    assert "counters same" in extra["message"]

    suite.state["calls"].clear()
    for path, text in original.items():  # recorded 100x slower: time reads faster however busy the CPU
        stored = yaml.safe_load(text)
        for entry in stored["entries"].values():
            entry["median_ms"] *= 100
            entry["history"] = [entry["median_ms"]]
        path.write_text(yaml.safe_dump(stored, explicit_end=True))
    decided = suite.runpytest("--gpuperf", "--gpuperf-count-undecided", SEEABLE, *FAST)
    decided.assert_outcomes(passed=2)
    assert suite.state["calls"] == []
    decided.stdout.fnmatch_lines(["*count-undecided: time decided every test whose baseline entry holds counters, none slower*"])


def test_more_work_counted_after_timing_fails_the_session_and_names_the_test(suite: pytest.Pytester) -> None:
    _spread_history(suite)
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


def test_nothing_is_counted_without_a_comparison_or_baseline_counters_or_after_a_stop(suite) -> None:
    result = suite.runpytest("--gpuperf", "--gpuperf-count-undecided", "--gpuperf-no-compare", *FAST)
    result.stdout.fnmatch_lines(["*count-undecided: nothing is judged under --gpuperf-no-compare*"])
    suite.makepyfile(test_work=TEST + "\ndef test_fails():\n    assert False\n")
    stopped = suite.runpytest("--gpuperf", "--gpuperf-count-undecided", UNSEEABLE, "-x", "-p", "no:randomly",
                              "--gpuperf-budget", "0.1")
    stopped.stdout.fnmatch_lines(["*count-undecided: the session stopped early; nothing counted*"])
    assert suite.state["calls"] == []
    suite.makepyfile(test_work=TEST)
    for path in (suite.path / "baselines").glob("*.yaml"):  # the same baseline without its counters
        stored = yaml.safe_load(path.read_text())
        for entry in stored["entries"].values():
            entry.pop("counters", None)
        path.write_text(yaml.safe_dump(stored, explicit_end=True))
    plain = suite.runpytest("--gpuperf", "--gpuperf-count-undecided", UNSEEABLE, *FAST)
    plain.stdout.fnmatch_lines(["*count-undecided: the baseline holds no counters to judge by*"])


def test_a_saved_re_measured_test_is_judged_again_on_its_judged_median_and_keeps_its_counters(suite) -> None:
    """A recording keeps its first run's median in `history`, but a suspect is judged on its fastest
    re-measurement: counting afterwards must not judge it on the slower first one."""
    from pytest_gpuperf.core.records import Result

    base = _record("t.py::a", "unsure", 0.2, 1.0)
    base["baseline"] = {"median_ms": 1.0, "counters": _counters(1000).to_dict(), "history": [1.0, 1.0, 1.0]}
    base.update(median_ms=1.02, history=[1.3], remeasured=2, change=0.02)
    again = undecided.rejudged(base, _counters(1000), None, 0.05)
    assert again["verdict"] != "slower" and not again["regression"] and again["counter_verdict"] == "same"
    assert again["history"] == [1.3] and Result.from_dict(again).counters == _counters(1000)
    suite.runpytest("--gpuperf", "--gpuperf-count-undecided", UNSEEABLE, "--gpuperf-save", *FAST)
    stored = yaml.safe_load(next((suite.path / "baselines").glob("*.yaml")).read_text())
    assert stored["entries"][NODE]["counters"]["instructions"] == [1000, 1000]


def test_counting_devices_follow_the_gpus_the_workers_timed_on() -> None:
    assert undecided.counting_devices(None, controller=True, workers=4, gpus=4) == [0, 1, 2, 3]
    assert undecided.counting_devices(None, controller=True, workers=4, gpus=2) == [0, 1]
    assert undecided.counting_devices(None, controller=True, workers=1, gpus=4) == [None]
    assert undecided.counting_devices(3, controller=True, workers=4, gpus=4) == [None]  # all timed on GPU 3
    assert undecided.counting_devices(None, controller=False, workers=0, gpus=8) == [None]


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
        assert "--gpuperf-shard=1/2" not in args  # the plan names the tests exactly
        if device.endswith("=1"):
            raise counting.CounterError("no Nsight Compute: ncu is not on the PATH")
        return counting.CounterRun({i: _counters(1000) for i in plan.select})

    recount = undecided.count_undecided(records, run, ["t.py", "--gpuperf-shard=1/2"], Path("."), True, [0, 1],
                                        lambda _: None, 0.05)
    assert sorted(asked) == [("--gpuperf-device=0", ["t.py::a"]), ("--gpuperf-device=1", ["t.py::b", "t.py::e"])]
    assert set(recount.counters) == {"t.py::a"} and records["t.py::a"]["counter_verdict"] == "same"
    assert records["t.py::b"].get("counter_verdict") is None
    assert "no counters: no Nsight Compute: ncu is not on the PATH" in recount.note()

    def broken(*args, **kwargs):
        raise ValueError("the window file holds garbage")

    fresh = {"t.py::a": _record("t.py::a", "unsure", 0.09, 3.0)}
    failed = undecided.count_undecided(fresh, broken, ["t.py"], Path("."), False, [None], lambda _: None, 0.05)
    assert failed.counters == {} and "no counters: the window file holds garbage" in failed.note()


def test_a_slower_test_is_counted_too_and_its_message_says_whether_the_code_did_more_work() -> None:
    slower = _record("t.py::s", "slower", 0.02, 1.0)
    slower.update(median_ms=1.3, regression=True, change=0.3, ci_ms=[1.29, 1.31], samples=100)
    records = {"t.py::s": slower, "t.py::d": _record("t.py::d", "same", 0.01, 1.0)}
    assert undecided.undecided_tests(records) == ["t.py::s"]

    def run(args, cwd, xdist, say, extra=(), when=""):
        return counting.CounterRun({"t.py::s": _counters(1000)})

    recount = undecided.count_undecided(records, run, ["t.py"], Path("."), False, [None], lambda _: None, 0.05)
    assert records["t.py::s"]["verdict"] == "slower" and records["t.py::s"]["regression"]
    assert "counters same" in records["t.py::s"]["message"] and recount.more_work == []
    assert "1 slower test did the same work (likely the machine, not the code): t.py::s" in recount.note()
