"""The plugin end to end through pytester, on the CPU: options, fixtures, the gate, outputs, errors."""
from __future__ import annotations

import json

import pytest
import yaml

from pytest_gpuperf.core.versions import TIMING_VERSION
from pytest_gpuperf.measure.device import has_cuda

pytest_plugins = ["pytester"]

# A function whose cost an environment variable scales: the gate's tests slow it down for real.
SCALED = """
import os, time
import pytest

def work():
    end = time.perf_counter() + 2e-4 * float(os.environ.get("GPUPERF_TEST_SCALE", "1"))
    while time.perf_counter() < end:
        pass
    return 42

def test_fast(gpu_benchmark):
    assert gpu_benchmark(work) == 42

@pytest.mark.gpuperf(threshold="90%")
def test_tolerant(gpu_benchmark):
    assert gpu_benchmark(work) == 42
"""
FAST = ["--gpuperf-budget", "0.15", "-p", "no:randomly"]


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_scaled=SCALED)
    return pytester


def _baseline(pytester: pytest.Pytester) -> dict:
    files = list((pytester.path / "baselines").glob("*.yaml"))
    assert len(files) == 1, files
    return yaml.safe_load(files[0].read_text())


def test_without_gpuperf_each_function_runs_once_as_a_correctness_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        calls = []
        def f(x, *, y):
            calls.append(1)
            return x + y
        def test_once(gpu_benchmark):
            assert gpu_benchmark(f, 1, y=2) == 3
            assert calls == [1] and gpu_benchmark.stats is None
    """)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpuperf: off*"])


def test_gpuperf_on_cpu_measures_and_reports(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_stats="""
        def test_stats(gpu_benchmark):
            out = gpu_benchmark(sum, range(1000), bytes=8000)
            assert out == 499500
            s = gpu_benchmark.stats
            assert s["method"] == "cpu" and s["samples"] >= 10
            assert s["min_ms"] <= s["median_ms"] <= s["max_ms"] and s["gbps"] > 0
            for key in ("mean_ms", "stddev_ms", "noise", "tflops", "pct_of_peak", "peak_memory_bytes"):
                assert key in s
    """)
    result = suite.runpytest("--gpuperf", *FAST)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["gpuperf: * [[]cpu-*", "*gpuperf results*", "*test_fast*", "*new*"])


def test_second_call_in_one_test_is_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_twice(gpu_benchmark):
            gpu_benchmark(abs, -1)
            gpu_benchmark(abs, -2)
    """)
    result = pytester.runpytest("--gpuperf", *FAST)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*already called in test_second_call_in_one_test_is_an_error.py::test_twice*"])


@pytest.mark.parametrize("args, message", [
    (["--gpuperf-threshold", "abc"], "*--gpuperf-threshold: threshold 'abc' is not a number*"),
    (["--gpuperf-threshold", "150%"], "*--gpuperf-threshold: *100% or more*"),
    (["--gpuperf-cache", "lukewarm"], "*--gpuperf-cache: 'lukewarm' is not a cache mode; use cold or warm*"),
    (["--gpuperf-budget", "-1"], "*--gpuperf-budget: '-1' must be greater than 0*"),
    (["--gpuperf-precision", "x"], "*--gpuperf-precision: *not a number*"),
    (["--gpuperf-device", "gpu0"], "*--gpuperf-device: 'gpu0' is not a device index*"),
])
def test_bad_option_values_are_usage_errors_naming_the_option(suite, args, message) -> None:
    result = suite.runpytest("--gpuperf", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_an_output_file_option_naming_a_directory_is_a_usage_error(suite) -> None:
    result = suite.runpytest("--gpuperf", f"--gpuperf-markdown={suite.path}", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-markdown: * is a directory; give a file path*"])


@pytest.mark.skipif(has_cuda(), reason="the warning is for CPU timing")
def test_cpu_timing_under_xdist_warns_that_workers_share_cores(suite) -> None:
    result = suite.runpytest("--gpuperf", "-n", "2", "-W", "always", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*--gpuperf on the CPU with -n 2: the workers time on shared cores*",
                                 "gpuperf: * s since start in each of 2 workers: *, outside measurements * s: before the first test *"])
    assert "shared cores" not in suite.runpytest("--gpuperf", "-n", "1", "-W", "always", *FAST).stdout.str()


@pytest.mark.skipif(has_cuda(), reason="CPU timing under xdist: one worker per GPU on a GPU host")
def test_each_result_says_what_its_test_cost_in_all_under_xdist_too(suite) -> None:
    """`test_s`: the test's setup, call and teardown, from the workers' reports that reach the
    controller, which writes the results (gpuperf ab --budget plans its rounds with it)."""
    result = suite.runpytest("--gpuperf", "-n", "2", "--gpuperf-json=r.json", *FAST)
    assert result.ret == pytest.ExitCode.OK
    infos = [b["extra_info"] for b in json.loads((suite.path / "r.json").read_text())["benchmarks"]]
    assert infos and all(info["test_s"] >= info["wall_s"] > 0 for info in infos)


@pytest.mark.parametrize("workers", [["-n", "2"], ["--tx", "2*popen", "--dist", "load"]])
def test_more_xdist_workers_than_gpus_are_refused_before_any_worker_starts(suite, monkeypatch, workers) -> None:
    """A one-GPU machine (the controller's GPU count, simulated): the refusal comes from the
    controller's configure, so no worker is started (a worker would write `started` here)."""
    pytest.importorskip("xdist")
    from pytest_gpuperf.plugin import workers as workers_mod

    monkeypatch.setattr(workers_mod, "gpu_count", lambda: 1)
    suite.makeconftest("""
        import pathlib

        def pytest_configure(config):
            if hasattr(config, "workerinput"):
                (pathlib.Path(__file__).parent / "started").write_text(config.workerinput["workerid"])
    """)
    result = suite.runpytest("--gpuperf", *workers, *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf with -n 2: only 1 GPU visible; workers sharing a GPU would "
                                 "time each other's work (use -n 1 or fewer)*"])
    assert not (suite.path / "started").exists() and "[gw" not in result.stdout.str()


def test_output_options_without_gpuperf_warn_that_nothing_is_written(suite) -> None:
    result = suite.runpytest("--gpuperf-save", "--gpuperf-json=out.json", "-W", "always")
    assert result.ret == pytest.ExitCode.OK and not (suite.path / "out.json").exists()
    result.stdout.fnmatch_lines(["*--gpuperf-save, --gpuperf-json without --gpuperf: nothing is measured*"])
    result = suite.runpytest("--gpuperf-json=out.json", "-n", "2", "-W", "always")  # once, not per worker
    assert result.stdout.str().count("without --gpuperf: nothing is measured") == 1


@pytest.mark.parametrize("marker", ['thresold="10%"', '"10%"'])
def test_a_marker_with_an_unknown_argument_names_the_test(pytester: pytest.Pytester, marker: str) -> None:
    pytester.makepyfile(f"""
        import pytest
        @pytest.mark.gpuperf({marker})
        def test_marked(gpu_benchmark):
            gpu_benchmark(abs, -1)
        def test_plain():
            pass
    """)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_marked: @pytest.mark.gpuperf takes only threshold= and group=*"])
    assert pytester.runpytest("-k", "plain").ret == pytest.ExitCode.OK  # deselected: not judged
    # An xdist worker cannot stop the session with a usage error: the test errors with the message.
    result = pytester.runpytest("-n", "2")
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.fnmatch_lines(["*test_marked: @pytest.mark.gpuperf takes only threshold= and group=*"])


@pytest.mark.parametrize("cost", ["bytes=-1", "bytes='lots'", "bytes='1e3'", "flops=float('nan')", "flops=10**400"])
def test_a_bad_cost_number_fails_the_test_before_measuring(pytester: pytest.Pytester, cost: str) -> None:
    pytester.makepyfile(f"""
        def test_cost(gpu_benchmark):
            gpu_benchmark(abs, -1, {cost})
    """)
    for args in ([], ["--gpuperf", *FAST]):  # caught in correctness runs too
        result = pytester.runpytest(*args)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*gpu_benchmark in test_*::test_cost: * must be a number >= 0*"])


def test_bad_ini_value_names_the_ini_key(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\ngpuperf_threshold = lots\n")
    result = suite.runpytest("--gpuperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini key gpuperf_threshold: threshold 'lots' is not a number*"])


def test_bad_marker_threshold_names_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.gpuperf(threshold="fast")
        def test_marked(gpu_benchmark):
            gpu_benchmark(abs, -1)
    """)
    for args in ([], ["--gpuperf", *FAST]):  # a usage error up front, measuring or not
        result = pytester.runpytest(*args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*test_marked: @pytest.mark.gpuperf(threshold=...): threshold 'fast' is not a number*"])


def test_save_then_compare_gates_a_real_slowdown(suite: pytest.Pytester, monkeypatch) -> None:
    saved = suite.runpytest("--gpuperf", "--gpuperf-save", *FAST)
    saved.assert_outcomes(passed=2)
    saved.stdout.fnmatch_lines(["*saved 2 entries to*"])
    # a recording is one run per test: its median joins the entry's history
    assert "repeated runs" not in saved.stdout.str()
    stored = _baseline(suite)
    assert stored["schema_version"] == 3 and stored["device"]["key"].startswith("cpu-")
    fast = stored["entries"]["test_scaled.py::test_fast"]
    assert fast["history"] == [fast["median_ms"]]
    assert set(stored["entries"]) == {"test_scaled.py::test_fast", "test_scaled.py::test_tolerant"}
    assert "data" not in stored["entries"]["test_scaled.py::test_fast"]

    same = suite.runpytest("--gpuperf", *FAST)
    same.assert_outcomes(passed=2)

    monkeypatch.setenv("GPUPERF_TEST_SCALE", "1.6")
    slow = suite.runpytest("--gpuperf", *FAST)
    assert slow.ret == pytest.ExitCode.TESTS_FAILED
    slow.assert_outcomes(passed=1, failed=1)  # test_tolerant has a 90% threshold
    slow.stdout.fnmatch_lines(["*gpuperf regression: slower: baseline *, now *, change +*",
                               "*1 regression against*"])

    no_compare = suite.runpytest("--gpuperf", "--gpuperf-no-compare", *FAST)
    no_compare.assert_outcomes(passed=2)


def test_entries_timed_with_another_timing_version_are_named_in_a_warning(suite: pytest.Pytester) -> None:
    suite.runpytest("--gpuperf", "--gpuperf-save", *FAST).assert_outcomes(passed=2)
    path = next((suite.path / "baselines").glob("*.yaml"))
    stored = yaml.safe_load(path.read_text())
    assert {e["timing"] for e in stored["entries"].values()} == {TIMING_VERSION}

    def run_with(**changes) -> str:
        entry = dict(stored["entries"]["test_scaled.py::test_fast"], **changes)
        entry = {k: v for k, v in entry.items() if v is not None}
        path.write_text(yaml.safe_dump(dict(stored, entries=dict(stored["entries"], **{"test_scaled.py::test_fast": entry})),
                                       sort_keys=False, explicit_end=True))
        # a 99% threshold: this test is about the warning, and host timings on a loaded CI core move
        result = suite.runpytest("--gpuperf", "--gpuperf-threshold", "99%", *FAST)
        result.assert_outcomes(passed=2)
        return result.stdout.str()

    assert "timing version" not in run_with(timing=1)  # host clocks: versions change nothing
    older = run_with(timing=1, method="events")  # a GPU entry timed before versions were recorded
    assert "(2 entries, 1 measured with another timing version)" in older
    assert (f"1 of 2 entries of {path} was timed with another timing version (e.g. test_scaled.py::test_fast: "
            f"timing version 1, and this gpuperf measures with {TIMING_VERSION}") in " ".join(older.split())
    assert "record them again (--gpuperf-save)" in older
    assert "upgrade pytest-gpuperf" in run_with(timing=TIMING_VERSION + 1, method="events")
    assert "timed with another" not in suite.runpytest("--gpuperf", "--gpuperf-no-compare", *FAST).stdout.str()


def test_a_recording_measures_the_way_its_stored_entry_was_even_without_a_comparison(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recording timed another way than its entry would start the entry's history anew, so
    `--gpuperf-save --gpuperf-no-compare` prefers the stored method, and the stored power-cap
    sampling (`loaded`), as a comparing run does; a run that neither compares nor saves does not."""
    from pytest_gpuperf.plugin import fixtures

    suite.runpytest("--gpuperf", "--gpuperf-save", *FAST).assert_outcomes(passed=2)
    path = next((suite.path / "baselines").glob("*.yaml"))
    stored = yaml.safe_load(path.read_text())
    for entry in stored["entries"].values():
        entry["method"], entry["loaded"] = "events", True
    preferred: list = []
    real = fixtures.measure

    def spy(*args, **kwargs):
        preferred.append((kwargs.get("prefer"), kwargs.get("loaded")))
        return real(*args, **kwargs)

    monkeypatch.setattr(fixtures, "measure", spy)
    for options, expected in ((["--gpuperf-save", "--gpuperf-no-compare"], ("events", True)),
                              ([], ("events", True)), (["--gpuperf-no-compare"], (None, False))):
        preferred.clear()
        path.write_text(yaml.safe_dump(stored, sort_keys=False, explicit_end=True))  # the CPU's recording stores "cpu"
        suite.runpytest("--gpuperf", "--gpuperf-threshold", "99%", *options, *FAST).assert_outcomes(passed=2)
        assert preferred and set(preferred) == {expected}, options


def test_save_merges_and_keeps_entries_not_run(suite: pytest.Pytester) -> None:
    suite.runpytest("--gpuperf", "--gpuperf-save", *FAST).assert_outcomes(passed=2)
    suite.runpytest("--gpuperf", "--gpuperf-save", "-k", "fast", *FAST).assert_outcomes(passed=1, deselected=1)
    assert set(_baseline(suite)["entries"]) == {"test_scaled.py::test_fast", "test_scaled.py::test_tolerant"}


def test_baseline_dir_option_and_ini_key(suite: pytest.Pytester) -> None:
    suite.runpytest("--gpuperf", "--gpuperf-save", "--gpuperf-baseline-dir", "elsewhere", *FAST)
    assert list((suite.path / "elsewhere").glob("cpu-*.yaml"))
    suite.makeini("[pytest]\ngpuperf_baseline_dir = perfdata\n")
    suite.runpytest("--gpuperf", "--gpuperf-save", *FAST)
    assert list((suite.path / "perfdata").glob("cpu-*.yaml"))


def test_corrupt_baseline_is_reported_and_left_alone(suite: pytest.Pytester) -> None:
    suite.runpytest("--gpuperf", "--gpuperf-save", *FAST)
    path = next((suite.path / "baselines").glob("*.yaml"))
    path.write_text("entries: [unclosed\n")
    result = suite.runpytest("--gpuperf", "--gpuperf-save", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{path.name}*"])
    assert path.read_text() == "entries: [unclosed\n"


def test_json_markdown_and_plot_outputs(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--gpuperf", "--gpuperf-json", "out/r.json", "--gpuperf-markdown", "out/r.md",
                             "--gpuperf-plot", "out/plots", *FAST)
    result.assert_outcomes(passed=2)
    data = json.loads((suite.path / "out" / "r.json").read_text())
    assert {b["fullname"] for b in data["benchmarks"]} == {"test_scaled.py::test_fast", "test_scaled.py::test_tolerant"}
    assert data["benchmarks"][0]["stats"]["median"] > 0
    assert "|" in (suite.path / "out" / "r.md").read_text()
    pngs = list((suite.path / "out" / "plots").glob("*.png"))
    assert pngs and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_gpu_profile_skips_without_a_gpu(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_profiled(gpu_profile):
            gpu_profile(abs, -1)
    """)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*gpu_profile needs a CUDA device*"])


def test_profiled_tests_run_after_the_timed_ones_under_gpuperf(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_profiled(gpu_profile):
            pass
        def test_timed(gpu_benchmark):
            gpu_benchmark(abs, -1)
        def test_also_profiled(gpu_profile):
            pass
        def test_plain():
            pass
    """)
    order = ["*test_timed*", "*test_plain*", "*test_profiled*", "*test_also_profiled*"]
    pytester.runpytest("--gpuperf", "--collect-only", "-q").stdout.fnmatch_lines(order, consecutive=True)
    pytester.runpytest("--collect-only", "-q").stdout.fnmatch_lines(
        ["*test_profiled*", "*test_timed*", "*test_also_profiled*", "*test_plain*"], consecutive=True)


def test_out_of_memory_is_a_skip_and_a_raising_function_a_failure(pytester: pytest.Pytester) -> None:
    pytorch = pytest.importorskip("torch")
    assert pytorch
    pytester.makepyfile("""
        import torch
        def oom():
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
        def broken():
            raise ValueError("kernel exploded")
        def test_oom(gpu_benchmark):
            gpu_benchmark(oom)
        def test_broken(gpu_benchmark):
            gpu_benchmark(broken)
        def test_after(gpu_benchmark):
            assert gpu_benchmark(abs, -3) == 3
    """)
    for args in ([], ["--gpuperf", *FAST]):
        result = pytester.runpytest("-rs", *args)
        result.assert_outcomes(passed=1, failed=1, skipped=1)
        result.stdout.fnmatch_lines(["*CUDA out of memory in *test_oom: *Tried to allocate 80.00 GiB*"])


def test_benchmark_fixture_of_pytest_benchmark_still_works(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_pb(benchmark):
            assert benchmark(sum, range(100)) == 4950
    """)
    pytester.runpytest("--gpuperf", *FAST, "--benchmark-disable-gc").assert_outcomes(passed=1)


def test_xdist_workers_results_land_in_one_baseline(suite: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = suite.runpytest_subprocess("-n", "2", "--gpuperf", "--gpuperf-save", *FAST)
    result.assert_outcomes(passed=2)
    assert set(_baseline(suite)["entries"]) == {"test_scaled.py::test_fast", "test_scaled.py::test_tolerant"}


def test_remaining_options_are_accepted_and_shown_in_the_header(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--gpuperf", "--gpuperf-cache", "warm", "--gpuperf-precision", "2%",
                             "--gpuperf-trace-dir", "traces", "--gpuperf-threshold", "7.5%", *FAST)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["gpuperf: cache=warm, threshold=7.5%, precision=2.00%, budget=0.15s; baseline: none yet*"])


def test_bad_retries_ini_is_a_usage_error(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\ngpuperf_retries = abc\n")
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini key gpuperf_retries: 'abc' is not a non-negative whole number*"])


def test_numpy_cost_numbers_reach_the_xdist_controller(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile("""
        import numpy as np
        def test_a(gpu_benchmark):
            gpu_benchmark(sum, range(100), bytes=np.prod((10, 80)), flops=np.int64(100))
        def test_b(gpu_benchmark):
            gpu_benchmark(sum, range(100))
    """)
    result = pytester.runpytest_subprocess("-n", "2", "--gpuperf", *FAST)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*2 measured: 2 new*"])


def test_under_gpuperf_collection_and_each_whole_test_run_on_one_stream_of_the_sessions(monkeypatch) -> None:
    """Collection, and each test's setup, body and teardown (pytest_runtest_protocol, not just the
    call), run on one stream, the same for every test and the timer's, so autograd never meets a leaf
    made on another stream and no large kernel at collection runs on another stream (a fake torch
    here)."""
    import contextlib
    import sys
    from types import SimpleNamespace

    from pytest_gpuperf.plugin import session

    class Stream:
        def __init__(self, device: str = "cuda:0") -> None:
            self.device, self.waited = device, []

        def wait_stream(self, other: "Stream") -> None:
            self.waited.append(other)

    default = Stream()
    state = {"current": default}

    @contextlib.contextmanager
    def use(stream: Stream):
        before, state["current"] = state["current"], stream
        try:
            yield
        finally:
            state["current"] = before

    from pytest_gpuperf.measure.calibration import Calibration

    fake = SimpleNamespace(cuda=SimpleNamespace(current_stream=lambda: state["current"], Stream=Stream, stream=use,
                                                current_device=lambda: 0))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(session, "has_cuda", lambda: True)
    perf = SimpleNamespace(settings=SimpleNamespace(enabled=True), calibration=Calibration(), is_worker=False,
                           config=SimpleNamespace(option=SimpleNamespace(collectonly=False, dist="no")))
    perf._on_session_stream = lambda: session.GpuPerf._on_session_stream(perf)
    perf._xdist_controller = lambda: session.GpuPerf._xdist_controller(perf)
    seen = []
    hooks = [lambda: session.GpuPerf.pytest_collection(perf, SimpleNamespace())] + [
        lambda: session.GpuPerf.pytest_runtest_protocol(perf, SimpleNamespace(), None)] * 2
    for hook in hooks:
        wrapper = hook()
        next(wrapper)
        seen.append(state["current"])
        with pytest.raises(StopIteration):
            next(wrapper)
        assert state["current"] is default
    assert seen[0] is seen[1] is seen[2] is not default  # collection too: its kernels share the tests' stream
    assert seen[0].waited == [default] * 3 and default.waited == [seen[0]] * 3
    assert perf.calibration.streams == {0: seen[0]}  # the timer's own: measure() in a test stays on it
    perf.config.option.collectonly = True  # --collect-only makes no stream and queues nothing
    wrapper = session.GpuPerf.pytest_collection(perf, SimpleNamespace())
    next(wrapper)
    assert state["current"] is default
    perf.config.option.collectonly, perf.config.option.dist, perf.config.option.tx = False, "load", ["2*popen"]
    wrapper = session.GpuPerf.pytest_collection(perf, SimpleNamespace())  # xdist's controller runs no test
    next(wrapper)
    assert state["current"] is default


@pytest.mark.parametrize("workerinput, share", [
    (None, (0, 1)), ({"workerid": "gw2", "workercount": 4}, (2, 4)), ({"workerid": "gw0", "workercount": 1}, (0, 1)),
    ({"workerid": "gw5", "workercount": 4}, (0, 1)), ({"workerid": "", "workercount": 2}, (0, 2))])
def test_an_xdist_workers_share_comes_from_its_workerinput(workerinput, share) -> None:
    """Which GPU a worker times on and which Triton kernels it compiles ahead: from what xdist's
    controller gave it, not the environment a pytest run inside a worker would inherit."""
    from types import SimpleNamespace

    from pytest_gpuperf.plugin.workers import xdist_share

    config = SimpleNamespace() if workerinput is None else SimpleNamespace(workerinput=workerinput)
    assert xdist_share(config) == share


@pytest.mark.parametrize("case", ["fast", "told", "coverage", "no xdist"])
def test_a_worker_under_gpuperf_ends_after_the_exit_handlers_without_the_interpreters_teardown(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """An xdist worker under --gpuperf runs the exit handlers a conftest and a test registered, then
    ends without the interpreter's teardown (a finalizer at shutdown never runs); GPUPERF_FAST_EXIT=0,
    coverage.py measuring the worker, or a run without xdist keeps the teardown."""
    marks = pytester.path
    measured = """
        import sys, types
        sys.modules["coverage"] = types.SimpleNamespace(Coverage=types.SimpleNamespace(current=lambda: object()))
    """ if case == "coverage" else ""
    pytester.makeconftest(f"""
        import atexit, pathlib
        atexit.register(lambda: (pathlib.Path({str(marks)!r}) / "conftest-handler").write_text(""))
    """)
    pytester.makepyfile(test_exit=measured + f"""
        import atexit, pathlib
        MARKS = pathlib.Path({str(marks)!r})

        class Held:
            def __del__(self):
                (MARKS / "teardown").write_text("")

        HELD = Held()

        def test_registers(gpu_benchmark):
            atexit.register(lambda: (MARKS / "test-handler").write_text(""))
            gpu_benchmark(lambda: None)
    """)
    if case == "told":
        monkeypatch.setenv("GPUPERF_FAST_EXIT", "0")
    workers = [] if case == "no xdist" else ["-n", "1"]
    result = pytester.runpytest_subprocess(*workers, "--gpuperf", "-p", "no:cacheprovider", *FAST)
    assert result.ret == pytest.ExitCode.OK
    assert (marks / "conftest-handler").exists() and (marks / "test-handler").exists()
    assert (marks / "teardown").exists() is (case != "fast")
