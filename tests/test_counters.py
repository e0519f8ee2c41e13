"""Hardware counters on the CPU: ncu's CSV (a recording from an H200), the counter gate's rules, their
storage, every refusal path, and the plugin's wiring through pytester with the counting pass faked."""
from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from pytest_gpuperf.core.counters import Counters, judge_counters, summed
from pytest_gpuperf.core.records import Entry, Identity, Result, Statistics
from pytest_gpuperf.core.versions import TIMING_VERSION
from pytest_gpuperf.core.verdict import is_regression
from typed import judge, result
from pytest_gpuperf.measure import counters as counting
from pytest_gpuperf.store import baseline as baseline_mod

pytest_plugins = ["pytester"]

RAW = Path(__file__).parent / "data" / "ncu_raw_h200.csv"


def _c(**values) -> Counters:
    return Counters({k: tuple(v if isinstance(v, (list, tuple)) else [v]) for k, v in values.items()})


# ---- ncu's CSV -----------------------------------------------------------------------------------

def test_the_raw_csv_gives_each_window_its_kernels_without_its_marker() -> None:
    windows = counting.parse_csv(RAW.read_text())
    assert sorted(windows) == [0, 1, 2, 3, 4]
    assert [len(windows[i]) for i in range(5)] == [1, 1, 1, 1, 1]  # each window: a marker, then the call's
    gelu = summed(windows[0])
    assert gelu.center("instructions") == 14_876_672  # thousands separators read
    assert gelu.center("dram_read_bytes") == 67_126_528
    assert gelu.center("launches") == 1
    assert gelu.center("occupancy_pct") == 81.62
    assert summed(windows[2]).center("tensor_instructions") > 2_000_000  # the cuBLAS matmul
    # the last row has no range (another thread launched it): it belongs to the window before it
    assert summed(windows[4]).center("instructions") == 368


def test_kernels_before_the_first_window_are_left_out() -> None:
    header, units, *rows = [line for line in RAW.read_text().splitlines() if not line.startswith("==")]
    stray = rows[-1].replace('"99"', '"0"', 1)  # profiled before any marker
    assert counting.parse_csv("\n".join([header, units, stray])) == {}


def test_windows_map_to_their_tests_and_a_window_without_kernels_counts_zero(tmp_path: Path) -> None:
    window_file = tmp_path / "windows.tsv"
    window_file.write_text("0\t1.5\t0.2\tt.py::test_a\n7\t0.1\t0.1\tt.py::test_empty\nnot a line\n")
    windows = counting.read_windows(window_file)
    assert windows[0] == counting.Window("t.py::test_a", 1.5, 0.2)
    by_test = counting.counters_by_test(windows, counting.parse_csv(RAW.read_text()))
    assert by_test["t.py::test_a"].center("instructions") == 14_876_672
    assert by_test["t.py::test_empty"].center("launches") == 0


def test_the_counting_process_drops_outputs_and_counts_in_one_process(tmp_path: Path) -> None:
    args = ["perf", "-k", "elu", "--gpuperf", "--gpuperf-counters", "--gpuperf-save", "--gpuperf-json", "x.json",
            "--gpuperf-markdown=s.md", "-n", "4"]
    out = counting.counting_args(args, tmp_path / "w.tsv", tmp_path / "cache", xdist=True)
    assert out[:5] == ["perf", "-k", "elu", "--gpuperf", "-n"]
    for gone in ("--gpuperf-counters", "--gpuperf-save", "x.json", "--gpuperf-markdown=s.md"):
        assert gone not in out
    assert f"--gpuperf-counter-pass={tmp_path / 'w.tsv'}" in out and out[-2:] == ["-n", "0"]
    assert "-n" not in counting.counting_args(["t.py"], tmp_path / "w", tmp_path / "c", xdist=False)


def test_ncu_is_found_where_the_toolkit_puts_it(tmp_path: Path) -> None:
    ncu = tmp_path / "bin" / "ncu"
    ncu.parent.mkdir()
    ncu.write_text("#!/bin/sh\n")
    ncu.chmod(0o755)
    assert counting.find_ncu({"GPUPERF_NCU": str(ncu)}) == str(ncu)
    assert counting.find_ncu({"GPUPERF_NCU": str(tmp_path / "nope")}) is None
    assert counting.find_ncu({"PATH": str(ncu.parent)}) == str(ncu)
    assert counting.find_ncu({"PATH": "", "CUDA_HOME": str(tmp_path)}) == str(ncu)


@pytest.mark.parametrize("log, expected", [
    ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", counting.PERMISSION_FIX),
    ("==ERROR== The application returned an error code (1).", None),  # a failing test costs no counters
    ("==ERROR== Failed to find metric sm__inst_executed_pipe_tensor.sum", "Nsight Compute: Failed to find metric"),
    ("==PROF== Disconnected", None),
])
def test_ncu_refusals_read_as_one_line_with_the_cause(log: str, expected: str | None) -> None:
    problem = counting.problem_in(log)
    assert problem == expected if expected is None else problem.startswith(expected)


def _fake_ncu(csv_text: str, windows: str, exit_log: str = ""):
    """A runner standing in for `subprocess.run(ncu ...)`: writes the window file and the CSV."""
    def run(command, cwd, stdout, stderr, check):
        window = next(a.split("=", 1)[1] for a in command if a.startswith("--gpuperf-counter-pass="))
        Path(window).write_text(windows)
        Path(command[command.index("--log-file") + 1]).write_text(csv_text)
        stdout.write(exit_log)
    return run


@pytest.fixture
def gpu_with_ncu(monkeypatch, tmp_path: Path) -> None:
    ncu = tmp_path / "ncu"
    ncu.write_text("#!/bin/sh\n")
    ncu.chmod(0o755)
    monkeypatch.setenv("GPUPERF_NCU", str(ncu))
    monkeypatch.setattr("pytest_gpuperf.measure.counters.has_cuda", lambda: True)


def test_a_counting_run_gives_counters_per_test_and_its_cost(gpu_with_ncu, tmp_path: Path) -> None:
    said = []
    run = counting.run_counting(["t.py"], tmp_path, False, said.append, work=tmp_path / "w",
                                runner=_fake_ncu(RAW.read_text(), "0\t2.0\t0.5\tt.py::test_gelu\n1\t1.0\t0.5\tt.py::test_sm\n"))
    assert set(run.counters) == {"t.py::test_gelu", "t.py::test_sm"} and run.kernels == 5
    assert run.warm_s == 3.0 and run.counted_s == 1.0
    assert "counted calls 1 s, their warm-up calls 3 s" in run.cost_text() and "ncu" in said[0]


@pytest.mark.parametrize("csv_text, windows, log, message", [
    ("", "", "==ERROR== ERR_NVGPUCTRPERM", "restricted to administrators"),
    ("", "0\t1\t1\tt.py::a\n", "", "profiled no kernel"),
    ("", "", "ERROR: file or directory not found", "counted no gpu_benchmark call"),
])
def test_a_counting_run_that_gives_nothing_says_why(gpu_with_ncu, tmp_path, csv_text, windows, log, message) -> None:
    with pytest.raises(counting.CounterError, match=message):
        counting.run_counting(["t.py"], tmp_path, False, lambda _: None, runner=_fake_ncu(csv_text, windows, log),
                               work=tmp_path / "w")


def test_no_ncu_and_no_gpu_are_one_line_each(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr("pytest_gpuperf.measure.counters.has_cuda", lambda: False)
    with pytest.raises(counting.CounterError, match="no CUDA device"):
        counting.run_counting(["t.py"], tmp_path, False, print)
    monkeypatch.setattr("pytest_gpuperf.measure.counters.has_cuda", lambda: True)
    monkeypatch.setattr(counting, "find_ncu", lambda env=None: None)
    with pytest.raises(counting.CounterError, match="GPUPERF_NCU"):
        counting.run_counting(["t.py"], tmp_path, False, print)


# ---- the counter gate ----------------------------------------------------------------------------

BASE = dict(instructions=1_000_000, dram_read_bytes=4_000_000, dram_write_bytes=4_000_000, l2_bytes=9_000_000,
            tensor_instructions=0, launches=1)


@pytest.mark.parametrize("moved, verdict", [
    ({}, "same"),
    ({"instructions": 1_004_000}, "same"),  # within the 0.5% floor
    ({"instructions": 1_010_000}, "more"),
    ({"instructions": 900_000}, "less"),
    ({"dram_read_bytes": 4_120_000}, "same"),  # DRAM reads move with the L2: 5% floor
    ({"dram_read_bytes": 6_000_000}, "more"),
    ({"dram_write_bytes": 4_300_000}, "same"),  # what the L2 kept at the end: 10%
    ({"launches": 2}, "more"),
    ({"l2_bytes": 20_000_000}, "same"),  # named, never judged
])
def test_counters_are_judged_against_their_floors(moved: dict, verdict: str) -> None:
    result = judge_counters(_c(**BASE), _c(**dict(BASE, **moved)))
    assert result.verdict == verdict
    assert set(result.moved) == {k for k, v in moved.items() if verdict != "same" or k == "l2_bytes"}


def test_a_counters_own_spread_widens_what_it_allows() -> None:
    noisy = _c(**dict(BASE, dram_read_bytes=[4_000_000, 4_400_000]))  # 10% apart in two recordings
    assert judge_counters(noisy, _c(**dict(BASE, dram_read_bytes=4_700_000))).verdict == "same"
    assert judge_counters(noisy, _c(**dict(BASE, dram_read_bytes=6_000_000))).verdict == "more"


def test_no_counters_on_a_side_is_no_counter_verdict() -> None:
    assert judge_counters(None, _c(**BASE)).verdict is None
    assert judge({"median_ms": 1.0}, {"median_ms": 1.0, "counters": {"instructions": [5]}}, 0.05).counters is None


def _entry(ms: float, **counters) -> dict:
    return {"median_ms": ms, "history": [ms, ms * 1.001], "counters": {k: [v] for k, v in counters.items()}}


def test_more_work_fails_a_test_whose_time_cannot_see_it_and_says_so() -> None:
    v = judge(_entry(0.003, **BASE), _entry(0.00301, **dict(BASE, instructions=1_300_000)), 0.05)
    assert v.time in ("same", "unsure") and v.counters == "more" and is_regression(v)
    assert "counters more: the code did more work: instructions +30.0%; timing alone read" in v.message


def test_more_work_that_ran_faster_is_named_but_does_not_fail() -> None:
    v = judge(_entry(1.0, **BASE), {"median_ms": 0.5, **_entry(0.5, **dict(BASE, instructions=1_300_000))}, 0.05)
    assert v.time == "faster" and v.counters == "more" and not is_regression(v)
    assert "though it ran faster" in v.message


def test_a_slowdown_with_the_same_work_names_the_machine() -> None:
    base = dict(_entry(1.0, **BASE), sm_clock_mhz=1980)
    now = dict(_entry(1.3, **BASE), sm_clock_mhz=1500)
    v = judge(base, now, 0.05)
    assert v.time == "slower" and v.counters == "same"
    assert "same instructions and DRAM bytes, SM clock 1980 vs 1500 MHz: likely the machine, not the code" in v.message


# ---- storage -------------------------------------------------------------------------------------

def test_counters_round_trip_as_whole_numbers_and_bad_ones_are_named() -> None:
    assert Counters.from_dict({"instructions": 5.0, "occupancy_pct": [81.5]}).to_dict() == {
        "instructions": [5], "occupancy_pct": [81.5]}
    for bad in ({"instructions": -1}, {"instructions": []}, {"instructions": "many"}, [1, 2]):
        with pytest.raises(ValueError, match="counter"):
            Counters.from_dict(bad)


def test_a_recording_extends_the_counters_history_until_the_code_changes() -> None:
    one, same, changed = (Entry(Statistics(1.0), counters=Counters.from_dict({"instructions": [n]})) for n in (1000, 1000, 1500))
    assert baseline_mod.merged_counters([one, same]).to_dict() == {"instructions": [1000, 1000]}
    assert baseline_mod.merged_counters([one, same, changed]).to_dict() == {"instructions": [1500]}  # starts anew
    assert baseline_mod.merged_counters([one, Entry(Statistics(1.0))]).to_dict() == {"instructions": [1000]}  # kept
    many = [Entry(Statistics(1.0), counters=Counters.from_dict({"instructions": [1000]}))] * 15
    assert len(baseline_mod.merged_counters(many).values["instructions"]) == 10  # the history window


def test_saving_keeps_and_extends_counters_and_a_bad_entry_names_file_and_test(tmp_path: Path) -> None:
    device = {"key": "cpu-test", "name": "test"}
    path = tmp_path / "cpu-test.yaml"
    timed = Entry(Statistics(1.0), method="events", cache="cold", timing=TIMING_VERSION)
    baseline_mod.save(path, device, {}, {"t.py::a": replace(timed, counters=Counters.from_dict({"instructions": [7]}))})
    baseline_mod.save(path, device, {}, {"t.py::a": timed})  # a timing-only recording
    baseline_mod.save(path, device, {}, {"t.py::a": replace(timed, counters=Counters.from_dict({"instructions": [7]}))})
    assert baseline_mod.load(path).entries["t.py::a"].counters == Counters.from_dict({"instructions": [7, 7]})
    text = path.read_text().replace("- 7", "- -7", 1)
    path.write_text(text)
    with pytest.raises(baseline_mod.BaselineError, match=r"cpu-test.yaml: entry 't.py::a': counter 'instructions'"):
        baseline_mod.load(path)


# ---- the plugin, its counting pass faked -----------------------------------------------------------

TEST = """
def work():
    return sum(range(2000))

def test_work(gpu_benchmark):
    assert gpu_benchmark(work) == sum(range(2000))
"""
FAST = ["--gpuperf-budget", "0.1", "-p", "no:randomly"]


@pytest.fixture
def counted(pytester: pytest.Pytester, monkeypatch):
    """A suite whose counting pass returns `counted.instructions` for its one test."""
    state = {"instructions": 1000}

    def fake(args, cwd, xdist, say, runner=None, work=None):
        say("gpuperf: counting (faked)")
        return counting.CounterRun({"test_work.py::test_work": _c(**dict(BASE, instructions=state["instructions"]))},
                                   1.0, 1, None, 0.5, 0.25)

    monkeypatch.setattr(counting, "run_counting", fake)
    pytester.makepyfile(test_work=TEST)
    pytester.state = state
    return pytester


def test_counters_are_recorded_judged_and_fail_a_test_that_did_more_work(counted: pytest.Pytester) -> None:
    result = counted.runpytest("--gpuperf", "--gpuperf-counters", "--gpuperf-save", "--gpuperf-json=r.json", *FAST)
    result.assert_outcomes(passed=1)
    result.stderr.fnmatch_lines(["*counting (faked)*"])  # before the session's terminal output starts
    result.stdout.fnmatch_lines(["*counters of 1 call (1 kernel) counted before timing in 1 s*"])
    stored = yaml.safe_load(next((counted.path / "baselines").glob("*.yaml")).read_text())
    assert stored["entries"]["test_work.py::test_work"]["counters"]["instructions"] == [1000]
    extra = json.loads((counted.path / "r.json").read_text())["benchmarks"][0]["extra_info"]
    assert extra["counters"]["instructions"] == [1000]

    counted.state["instructions"] = 1500
    failed = counted.runpytest("--gpuperf", "--gpuperf-counters", "--gpuperf-threshold=90%", *FAST)
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*gpuperf regression: *counters more: the code did more work: instructions +50.0%*"])
    assert "more work" in failed.stdout.str()

    counted.state["instructions"] = 1000
    counted.runpytest("--gpuperf", "--gpuperf-counters", "--gpuperf-threshold=90%", *FAST).assert_outcomes(passed=1)


def test_counters_need_gpuperf_and_their_absence_is_one_line(pytester: pytest.Pytester, monkeypatch) -> None:
    pytester.makepyfile(test_work=TEST)
    result = pytester.runpytest("--gpuperf-counters")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-counters: counters are judged beside time; add --gpuperf*"])
    monkeypatch.setattr("pytest_gpuperf.measure.counters.has_cuda", lambda: False)
    ran = pytester.runpytest("--gpuperf", "--gpuperf-counters", *FAST)
    ran.assert_outcomes(passed=1)
    ran.stdout.fnmatch_lines(["*no counters: no CUDA device is visible*timing goes on without them*"])


@pytest.mark.skipif(os.name != "posix", reason="a shell script stands in for ncu")
def test_the_counting_process_is_started_under_ncu_with_the_users_selection(pytester, monkeypatch) -> None:
    """A fake ncu that records its command line and runs nothing: the counting process gets the
    user's selection and the counting options, and no output of the timing run."""
    record = pytester.path / "argv.txt"
    ncu = pytester.path / "ncu"
    ncu.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {record}\n")
    ncu.chmod(0o755)
    monkeypatch.setenv("GPUPERF_NCU", str(ncu))
    monkeypatch.setattr("pytest_gpuperf.measure.counters.has_cuda", lambda: True)
    pytester.makepyfile(test_work=TEST)
    result = pytester.runpytest("--gpuperf", "--gpuperf-counters", "--gpuperf-json=r.json", "-k", "work", *FAST)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*no counters: the counting process counted no gpu_benchmark call*"])
    argv = record.read_text().splitlines()
    assert argv[:4] == ["--profile-from-start", "off", "--nvtx", "--metrics"]
    assert "-k" in argv and "work" in argv and "--gpuperf-json=r.json" not in argv
    assert any(a.startswith("--gpuperf-counter-pass=") for a in argv)


def test_a_declaration_far_above_the_dram_bytes_moved_is_named() -> None:
    from pytest_gpuperf.core.counters import declared_bytes_note

    moved = _c(dram_read_bytes=1 << 30, dram_write_bytes=1 << 30)
    l2 = 50 << 20
    assert declared_bytes_note(2 << 30, moved, l2) is None
    assert declared_bytes_note(1 << 30, moved, l2) is None  # moving more than declared: an unfused impl
    assert "4.0x too high" in declared_bytes_note(8 << 30, moved, l2)
    assert declared_bytes_note(8 << 20, _c(dram_read_bytes=1, dram_write_bytes=1), l2) is None  # fits the L2
    assert declared_bytes_note(8 << 30, None, l2) is None


def test_a_roofline_per_group_places_each_result_by_its_measured_intensity(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from pytest_gpuperf.report.roofline import intensity, write_rooflines

    counted = Counters.from_dict({"dram_read_bytes": [1e9], "dram_write_bytes": [1e9]})
    results = [
        Result(Identity("t.py::test_mm[triton-4096]", "test_mm", "triton-4096", "test_mm"), Statistics(3.3),
               flops=2e12, tflops=600.0, counters=counted),
        Result(Identity("t.py::test_mm[cublas-4096]", "test_mm", "cublas-4096", "test_mm"), Statistics(3.1),
               flops=2e12, tflops=650.0, counters=counted),
        Result(Identity.of_nodeid("t.py::test_copy[x]"), Statistics(1.0)),  # no counters
    ]
    assert intensity(results[0]) == 1000.0 and intensity(results[2]) is None
    paths = write_rooflines(tmp_path, results, {"name": "GPU", "peaks": {"copy_gbps": 3000.0, "bf16_tflops": 740.0}})
    assert [p.name for p in paths] == ["roofline-test_mm.png"] and paths[0].stat().st_size > 1000
    assert write_rooflines(tmp_path, results[2:], None) == []


def test_the_counting_process_runs_only_the_tests_that_use_gpu_benchmark(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_work=TEST + "\ndef test_plain():\n    assert True\n")
    window = pytester.path / "w.tsv"
    result = pytester.runpytest("--gpuperf", f"--gpuperf-counter-pass={window}", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_work.py::test_work", "*1 deselected*"])
    assert "test_plain" not in result.stdout.str()


def test_merging_recordings_pools_their_counters() -> None:
    timed = Entry(Statistics(1.0), method="events", cache="cold", timing=TIMING_VERSION, counters=Counters.from_dict({"instructions": [7]}))
    first = {"t.py::a": timed}
    second = {"t.py::a": replace(timed, stats=Statistics(1.01))}
    merged, _ = baseline_mod.combine([("one", first), ("two", second)])
    assert merged["t.py::a"].counters == Counters.from_dict({"instructions": [7, 7]}) and len(merged["t.py::a"].history) == 2


def test_a_recording_whose_counters_say_the_code_changed_starts_the_time_history_anew() -> None:
    """A faster kernel saved over a slower one's entry: its median is not pooled with the old
    code's (which would set a center neither code runs at), and the merge says why."""
    old = Entry(Statistics(1.14), method="events", cache="cold", timing=TIMING_VERSION,
                history=[1.13, 1.14, 1.15], counters=Counters.from_dict({"instructions": [1000, 1000]}))
    new = replace(old, stats=Statistics(0.90), history=None, counters=Counters.from_dict({"instructions": [730]}))
    merged, notes = baseline_mod.combine([("baseline", {"t.py::a": old}), ("this run", {"t.py::a": new})])
    entry = merged["t.py::a"]
    assert entry.stats.median_ms == pytest.approx(0.90) and entry.history == [0.9]
    assert entry.counters == Counters.from_dict({"instructions": [730]}) and any("code changed" in n for n in notes)
    same = replace(new, counters=Counters.from_dict({"instructions": [1000]}))  # the same code, measured faster: pooled
    merged, _ = baseline_mod.combine([("baseline", {"t.py::a": old}), ("this run", {"t.py::a": same})])
    assert len(merged["t.py::a"].history) == 4


def test_saving_a_recording_whose_counters_say_the_code_changed_starts_the_time_history_anew(tmp_path: Path) -> None:
    """--gpuperf-save over an entry of other code keeps none of its medians, peaks or drift, as the
    merge does; a recording of the same code extends them."""
    device, path = {"key": "cpu-test", "name": "test"}, tmp_path / "cpu-test.yaml"
    old = Entry(Statistics(1.14), method="events", cache="cold", timing=TIMING_VERSION, peak_memory_bytes=100,
                history=[1.13, 1.14, 1.15], drift=0.05, counters=Counters.from_dict({"instructions": [1000, 1000]}))
    baseline_mod.save(path, device, {}, {"t.py::a": old})
    new = replace(old, stats=Statistics(0.90), history=None, drift=None, peak_memory_bytes=80,
                  counters=Counters.from_dict({"instructions": [730]}))
    baseline_mod.save(path, device, {}, {"t.py::a": new})
    entry = baseline_mod.load(path, "cpu-test").entries["t.py::a"]
    assert entry.stats.median_ms == pytest.approx(0.90) and entry.history == [0.9]
    assert entry.peak_memory_bytes == 80 and entry.drift is None and entry.counters == Counters.from_dict({"instructions": [730]})
    baseline_mod.save(path, device, {}, {"t.py::a": replace(new, stats=Statistics(0.92))})  # the same code
    assert baseline_mod.load(path, "cpu-test").entries["t.py::a"].history == [0.9, 0.92]


def test_the_summary_says_what_the_counters_decided_or_why_not() -> None:
    from pytest_gpuperf.report.rows import counters_line, summary_counts, verdict_text

    undecided = result({"verdict": "same", "detects": 0.3, "threshold": 0.05})
    decided = replace(undecided, judgement=replace(undecided.judgement, counter_verdict="same"),
                      counters=Counters.from_dict({"instructions": [1]}))
    assert verdict_text(decided) == "same?, same work" and "1 undecided" in summary_counts([decided])
    assert counters_line([decided, result({"verdict": "same", "counter_verdict": "more"})]) == (
        "gpuperf: 1 test undecided by time; counters judged 2 tests (1 more work, 1 same work) and decided 1 of the 1")
    assert "baseline holds no counters" in counters_line([replace(undecided, counters=Counters.from_dict({"instructions": [1]}))])
    assert "--gpuperf-counters decides them" in counters_line([undecided])
    other = replace(decided, judgement=replace(decided.judgement, counter_verdict="other"))
    assert counters_line([decided, other]).endswith("(1 same work, 1 other kernels than recorded) and decided 1 of the 2")
    assert counters_line([result({"verdict": "same", "detects": 0.01, "threshold": 0.05})]) is None


# ---- after review --------------------------------------------------------------------------------

def test_an_ncu_that_cannot_run_is_one_line_not_a_crash(gpu_with_ncu, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUPERF_NCU", str(tmp_path))  # a folder
    with pytest.raises(counting.CounterError, match=f"GPUPERF_NCU={tmp_path} is not an executable file"):
        counting.run_counting(["t.py"], tmp_path, False, print)
    monkeypatch.setenv("GPUPERF_NCU", str(Path(counting.__file__)))  # executable bit aside: a runner that fails
    monkeypatch.setattr(counting, "find_ncu", lambda env=None: "/x/ncu")

    def cannot(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    with pytest.raises(counting.CounterError, match="cannot run /x/ncu: Permission denied"):
        counting.run_counting(["t.py"], tmp_path, False, print, runner=cannot, work=tmp_path / "w")


def test_each_call_is_counted_twice_and_both_counts_are_kept(tmp_path: Path) -> None:
    window_file = tmp_path / "windows.tsv"
    window_file.write_text("0\t1.0\t0.2\tt.py::a\n1\t0.0\t0.2\tt.py::a\n")
    by_test = counting.counters_by_test(counting.read_windows(window_file), counting.parse_csv(RAW.read_text()))
    assert by_test["t.py::a"].values["instructions"] == (14_876_672, 76_544)  # windows 0 and 1 of the recording
    assert counting.COUNTED_CALLS == 2


def test_the_counting_process_leaves_out_what_stops_it_or_picks_other_tests(tmp_path: Path) -> None:
    out = counting.counting_args(["-x", "--lf", "--maxfail", "3", "--sw", "--maxfail=2", "t.py"], tmp_path / "w",
                                 tmp_path / "c", xdist=False)
    assert out[0] == "t.py" and not {"-x", "--lf", "--sw", "--maxfail", "3", "--maxfail=2"} & set(out)


def test_a_noisy_counter_extends_its_history_and_a_code_change_starts_it_anew() -> None:
    from pytest_gpuperf.core.counters import code_changed

    noisy = [Entry(Statistics(1.0), counters=Counters.from_dict({"instructions": [n], "launches": [1]}))
             for n in (1_000_000, 1_006_000, 1_000_000)]
    history = baseline_mod.merged_counters(noisy)
    assert history.to_dict()["instructions"] == [1_000_000, 1_006_000, 1_000_000]
    assert judge_counters(history, _c(instructions=1_006_000, launches=1)).verdict == "same"  # learned
    assert code_changed(_c(instructions=100, launches=1), _c(instructions=100, launches=2))
    assert code_changed(_c(instructions=100, launches=1), _c(instructions=103, launches=1))


def test_a_count_that_varies_from_call_to_call_is_held_to_a_wider_floor() -> None:
    """cuDNN's small attention forward on an H200: two calls of one process 16,020 and 15,996
    instructions, of another 16,356 and 16,340 (+2.1%); a deterministic kernel's count does not move."""
    from pytest_gpuperf.core.counters import code_changed

    first, second = _c(instructions=[16_020, 15_996], launches=1), _c(instructions=[16_356, 16_340], launches=1)
    assert judge_counters(first, second).verdict == "same" and not code_changed(first, second)
    assert judge_counters(first, _c(instructions=[17_300, 17_310], launches=1)).verdict == "more"  # +8%
    steady = _c(instructions=[16_020, 16_020], launches=1)
    assert judge_counters(steady, _c(instructions=[16_356, 16_356], launches=1)).verdict == "more"
    assert judge_counters(steady, _c(instructions=[16_805, 16_807], launches=1)).verdict == "more"  # 2 apart: steady


def test_other_kernels_than_recorded_are_not_judged_by_their_counts() -> None:
    base = _c(instructions=1000, launches=1, kernel_set=[11, 12])  # two picks seen in the recordings
    assert judge_counters(base, _c(instructions=5000, launches=1, kernel_set=12)).verdict == "more"
    other = judge_counters(base, _c(instructions=5000, launches=1, kernel_set=13))
    assert other.verdict == "other" and "autotuning or dispatch" in other.message
    v = judge({"median_ms": 1.0, "history": [1.0, 1.0], "counters": base.to_dict()},
              {"median_ms": 1.0, "counters": {"instructions": [5000], "launches": [1], "kernel_set": [13]}}, 0.05)
    assert v.counters == "other" and not is_regression(v) and "counters other" in v.message


def test_the_kernel_set_is_a_fingerprint_of_the_names() -> None:
    from pytest_gpuperf.core.counters import KERNEL_SET

    windows = counting.parse_csv(RAW.read_text())
    assert summed(windows[0]).center(KERNEL_SET) == summed(windows[0]).center(KERNEL_SET) > 0
    assert summed(windows[0]).center(KERNEL_SET) != summed(windows[1]).center(KERNEL_SET)


def test_listing_runs_count_nothing(pytester: pytest.Pytester, monkeypatch) -> None:
    called = []
    monkeypatch.setattr(counting, "run_counting", lambda *a, **k: called.append(a))
    pytester.makepyfile(test_work=TEST)
    for listing in ("--collect-only", "--fixtures", "--setup-plan"):
        pytester.runpytest("--gpuperf", "--gpuperf-counters", listing)
    assert called == []
    assert pytester.runpytest("--gpuperf-counters", "--help").ret == 0


def test_ab_refuses_counters_it_cannot_count_up_front(monkeypatch, capsys) -> None:
    from pytest_gpuperf import cli

    monkeypatch.setattr(counting, "has_cuda", lambda: False)
    assert cli.main(["ab", "HEAD", "--counters", "--", "t.py"]) == 2
    assert "gpuperf ab: --counters: no CUDA device is visible" in capsys.readouterr().err
    assert cli.main(["ab", "HEAD", "--count-undecided", "--", "t.py"]) == 2
    assert "gpuperf ab: --count-undecided: no CUDA device is visible" in capsys.readouterr().err
    assert cli.main(["ab", "HEAD", "--counters", "--count-undecided", "--", "t.py"]) == 2
    assert "leave out --count-undecided" in capsys.readouterr().err
    from pytest_gpuperf.ab import AbError, pytest_args_for

    for option in ("--gpuperf-counters", "--gpuperf-count-undecided"):
        with pytest.raises(AbError, match=r"give gpuperf ab --counters \(every test.*or --count-undecided"):
            pytest_args_for([option], Path.cwd(), Path.cwd())


def test_bad_counters_in_a_results_file_name_the_file_and_test(tmp_path: Path) -> None:
    from pytest_gpuperf.store.results import load_results

    doc = {"benchmarks": [{"fullname": "t.py::a", "name": "a", "stats": {"median": 0.001},
                           "extra_info": {"counters": {"instructions": "lots"}}}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"r.json: benchmark 't.py::a': counter 'instructions'"):
        load_results(path)
