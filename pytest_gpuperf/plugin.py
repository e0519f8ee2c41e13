"""pytest-gpuperf's pytest plugin: options, fixtures, per-test results, the regression gate, the summary.

Without --gpuperf every `gpu_benchmark` call runs its function once and returns the result, so the
same tests are correctness tests on any machine. With --gpuperf each call is measured (timing.py),
turned into a result record, judged against this device's baseline (compare.py, re-measuring a
suspect result before failing it), and carried to the controller in `report.user_properties`, which
is how results from pytest-xdist workers reach one summary, one JSON file and one baseline.
"""
from __future__ import annotations

import functools
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from . import baseline as baseline_mod
from . import compare, node_gap
from .device import Peaks, describe, has_cuda, merged_peaks, read_clocks, software_versions
from .timing import (TIMING_VERSION, Measurement, TimingConfig, cuda_sync_timer, iter_tensors, measure,
                     recorded_version, version_note)
from .tolerance import is_nonnegative_number

RECORD = "gpuperf"  # user_properties key of a test's result record
_STATE = pytest.StashKey["GpuPerf"]()
_ITEM_RECORD = pytest.StashKey[dict]()
_MARKER_ERROR = pytest.StashKey[str]()


# --------------------------------------------------------------------------------------------
# options
# --------------------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuperf", "GPU performance measurement and regression gate (pytest-gpuperf)")
    group.addoption("--gpuperf", action="store_true",
                    help="measure every gpu_benchmark call (otherwise each runs once, as a correctness test)")
    group.addoption("--gpuperf-baseline-dir", metavar="DIR",
                    help="directory of <device-key>.yaml baselines (default: ini gpuperf_baseline_dir, 'baselines')")
    group.addoption("--gpuperf-save", action="store_true",
                    help="merge this run's measurements into this device's baseline file")
    group.addoption("--gpuperf-no-compare", action="store_true",
                    help="measure but do not compare with the stored baseline")
    group.addoption("--gpuperf-threshold", metavar="PCT",
                    help="slowdown that counts as a regression, e.g. 5%% (default: ini gpuperf_threshold, 5%%)")
    group.addoption("--gpuperf-json", metavar="PATH", help="write results in pytest-benchmark's JSON format")
    group.addoption("--gpuperf-markdown", metavar="PATH", help="write the summary table as Markdown")
    group.addoption("--gpuperf-plot", metavar="DIR", help="write PNG plots (per kernel, baseline vs now)")
    group.addoption("--gpuperf-trace-dir", metavar="DIR", help="write a chrome trace for every gpu_profile call")
    group.addoption("--gpuperf-cache", metavar="cold|warm",
                    help="flush the L2 before each sample (cold, default) or not (warm)")
    group.addoption("--gpuperf-device", metavar="N", help="CUDA device index (under xdist: worker k uses k %% count)")
    group.addoption("--gpuperf-precision", metavar="PCT",
                    help="stop sampling once the median's 95%% CI is within this (default 0.5%%)")
    group.addoption("--gpuperf-budget", metavar="SECONDS",
                    help="sampling time budget per measurement (default 1.0)")
    parser.addini("gpuperf_baseline_dir", "directory of <device-key>.yaml baselines", default="baselines")
    parser.addini("gpuperf_threshold", "slowdown that counts as a regression", default="5%")
    parser.addini("gpuperf_cache", "cold or warm L2 between samples", default="cold")
    parser.addini("gpuperf_precision", "target precision of the median (95% CI half-width)", default="0.5%")
    parser.addini("gpuperf_budget", "sampling time budget per measurement, seconds", default="1.0")
    parser.addini("gpuperf_retries",
                  "re-measurements of a suspect result before it fails (a recording takes 1 + this many runs)",
                  default="2")


def _setting(config: pytest.Config, option: str | None, ini: str) -> tuple[str, str]:
    """(value, where it came from) for a setting with an ini key and maybe a command-line option."""
    value = config.getoption(option) if option else None
    if value is not None:
        return str(value), "--" + option.replace("_", "-")
    return str(config.getini(ini)), f"ini key {ini}"


def _parse(config: pytest.Config, option: str | None, ini: str, parse: Callable[[str], Any]) -> Any:
    text, where = _setting(config, option, ini)
    try:
        return parse(text)
    except ValueError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from None


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"{text!r} must be greater than 0")
    return value


def _cache_mode(text: str) -> str:
    if text not in ("cold", "warm"):
        raise ValueError(f"{text!r} is not a cache mode; use cold or warm")
    return text


def _count(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"{text!r} is not a non-negative whole number")
    return int(text)


@dataclass
class Settings:
    """Validated options of one session."""

    enabled: bool
    threshold: float
    timing: TimingConfig
    retries: int
    baseline_dir: Path
    save: bool
    compare: bool
    json_path: Path | None
    markdown_path: Path | None
    plot_dir: Path | None
    trace_dir: Path | None
    device_index: int | None

    @classmethod
    def from_config(cls, config: pytest.Config) -> "Settings":
        for option in ("gpuperf_json", "gpuperf_markdown"):  # files, written at the end: say so now
            value = config.getoption(option)
            if value is not None and Path(value).is_dir():
                raise pytest.UsageError(f"--{option.replace('_', '-')}: {value} is a directory; give a file path")
        root = config.rootpath
        base_text, _ = _setting(config, "gpuperf_baseline_dir", "gpuperf_baseline_dir")
        device = config.getoption("gpuperf_device")
        if device is not None and not str(device).isdigit():
            raise pytest.UsageError(f"--gpuperf-device: {device!r} is not a device index (0, 1, ...)")
        budget = _parse(config, "gpuperf_budget", "gpuperf_budget", _positive_float)
        path = lambda opt: None if config.getoption(opt) is None else Path(config.getoption(opt))  # noqa: E731
        return cls(
            enabled=bool(config.getoption("gpuperf")),
            threshold=_parse(config, "gpuperf_threshold", "gpuperf_threshold", compare.parse_threshold),
            timing=TimingConfig(
                cache=_parse(config, "gpuperf_cache", "gpuperf_cache", _cache_mode),
                precision=_parse(config, "gpuperf_precision", "gpuperf_precision", compare.parse_threshold),
                budget_s=budget,
                batch_s=min(TimingConfig.batch_s, budget / 10),  # a small budget still sees several batches
            ),
            retries=_parse(config, None, "gpuperf_retries", _count),
            baseline_dir=root / base_text,
            save=bool(config.getoption("gpuperf_save")),
            compare=not config.getoption("gpuperf_no_compare"),
            json_path=path("gpuperf_json"),
            markdown_path=path("gpuperf_markdown"),
            plot_dir=path("gpuperf_plot"),
            trace_dir=path("gpuperf_trace_dir"),
            device_index=None if device is None else int(device),
        )


# --------------------------------------------------------------------------------------------
# session state
# --------------------------------------------------------------------------------------------
class GpuPerf:
    """Everything one pytest process knows about the run: settings, device, peaks, baseline, results."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.is_worker = hasattr(config, "workerinput")
        self.results: dict[str, dict] = {}
        self.started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._t0 = time.perf_counter()
        self._peaks: Peaks | None = None
        self._stored_peaks: dict[str, float] = {}
        self.collected: set[str] = set()
        self.saved: int | None = None
        self.write_error: str | None = None
        self.device: dict[str, Any] = {}
        self.baseline: baseline_mod.Baseline | None = None
        self._test_streams: dict[Any, Any] = {}  # device -> the stream timed tests run on (see pytest_runtest_call)
        if settings.enabled:
            self._select_device()
            self.device = describe()
            self.baseline = self._load_baseline()

    def _select_device(self) -> None:
        if not has_cuda():
            return
        import torch

        count = torch.cuda.device_count()
        index = self.settings.device_index
        if index is None and self.is_worker:
            workers = int(self.config.workerinput.get("workercount", 1))
            if workers > count:
                raise pytest.UsageError(f"--gpuperf with -n {workers}: only {count} GPU(s) visible; workers sharing "
                                        f"a GPU would time each other's work (use -n {count} or fewer)")
            index = int(re.sub(r"\D", "", self.config.workerinput["workerid"]) or 0) % count
        if index is not None:
            if index >= count:
                raise pytest.UsageError(f"--gpuperf-device: device {index} does not exist ({count} visible)")
            torch.cuda.set_device(index)

    def stale_entries(self) -> list[str]:
        """Baseline entries timed with a version whose reading of their method this gpuperf's has
        changed since (none recorded: version 1): comparisons against them see that change too."""
        if self.baseline is None:
            return []
        return sorted(name for name, e in self.baseline.entries.items() if version_note(e))

    @property
    def baseline_path(self) -> Path:
        return baseline_mod.baseline_path(self.settings.baseline_dir, self.device["key"])

    def _load_baseline(self) -> baseline_mod.Baseline | None:
        try:
            return baseline_mod.load(self.baseline_path, self.device["key"])
        except baseline_mod.BaselineError as exc:
            raise pytest.UsageError(f"gpuperf: {exc}") from None

    @property
    def peaks(self) -> Peaks:
        """Measured peaks, kept in pytest's cache per device and torch version so runs share them."""
        if self._peaks is None:
            cache = getattr(self.config, "cache", None)
            self._stored_peaks = dict(cache.get(self._peaks_key(), {})) if cache is not None else {}
            self._peaks = Peaks(self._stored_peaks)
        return self._peaks

    def _peaks_key(self) -> str:
        return f"gpuperf/peaks/{self.device['key']}/{software_versions().get('torch')}"

    def store_peaks(self) -> None:
        """Write newly measured peaks to pytest's cache (once per new peak, not once per test)."""
        cache = getattr(self.config, "cache", None)
        if self._peaks is not None and cache is not None and self._peaks.values != self._stored_peaks:
            cache.set(self._peaks_key(), self._peaks.values)
            self._stored_peaks = dict(self._peaks.values)

    # -- hooks of the registered session object -------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Under --gpuperf on CUDA, pytest-benchmark's `benchmark` fixture gets a synchronizing timer."""
        bs = getattr(self.config, "_benchmarksession", None)
        explicit = any(str(arg).startswith("--benchmark-timer") for arg in self.config.invocation_params.args)
        if self.settings.enabled and bs is not None and not explicit and has_cuda():
            from pytest_benchmark.utils import NameWrapper

            bs.options["timer"] = NameWrapper(cuda_sync_timer)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if not self.settings.enabled:
            return ["gpuperf: off (gpu_benchmark calls run once as correctness tests; --gpuperf to measure)"]
        d, sw, s = self.device, software_versions(), self.settings
        index = _current_index()
        clock = read_clocks(index).sm_clock_mhz
        base = self.baseline
        stale = len(self.stale_entries())
        stored = (f"{self.baseline_path} ({len(base.entries)} entries"
                  + (f", {stale} measured with another timing version" if stale else "") + ")"
                  if base else f"none yet at {self.baseline_path}")
        arch = f", sm_{d['capability'].replace('.', '')}, {d['sm_count']} SMs" if d.get("capability") else ""
        return [
            f"gpuperf: {d['name']} [{d['key']}]{arch}" + (f", SM clock {clock} MHz" if clock else "")
            + f"; torch {sw.get('torch')}, triton {sw.get('triton')}, CUDA {sw.get('cuda')}, driver {sw.get('driver')}",
            f"gpuperf: cache={s.timing.cache}, threshold={s.threshold:.1%}, precision={s.timing.precision:.2%}, "
            f"budget={s.timing.budget_s:g}s; baseline: {stored}" + ("" if s.compare else " (not compared)"),
        ] + ([f"gpuperf: {self._node_gap_line(config, index)}"] if index is not None else [])

    @staticmethod
    def _node_gap_line(config: pytest.Config, index: int) -> str:
        """The header's node-gap line; a session that only collects does not measure the gap."""
        if not config.option.collectonly:
            return node_gap.lookup(index).describe()
        gap = node_gap.known(index)
        return gap.describe() if gap else ("graph node gap: not measured yet on this GPU (a ~15 s CUPTI "
                                           "measurement before the first test is timed)")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect result records (from this process or, under xdist, from the workers)."""
        if report.when == "call":
            self.collected.add(report.nodeid)  # an xdist controller collects nothing itself
            for key, value in report.user_properties:
                if key == RECORD:
                    self.results[report.nodeid] = value

    @pytest.hookimpl(trylast=True)  # after -k/-m deselection: only the tests that will run
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """A bad @pytest.mark.gpuperf marker is a usage error up front, with or without --gpuperf. An
        xdist worker cannot stop the session that way (the controller reports an internal error
        that names nothing), so there the test itself fails with the message.

        Under --gpuperf, tests that use gpu_profile run after all the others (in their own order):
        torch.profiler leaves CUPTI attached to the process, and every later kernel launch pays for
        its callbacks. On an H100 a 4K-float torch.mul took 7.9 µs of host time to launch before
        the first profiling session and 16.9 µs after it, which moves the line between calls
        timed with events and launch-bound ones. Kineto's TEARDOWN_CUPTI=1 releases CUPTI, but a
        suite's profiled tests hung under it there."""
        for item in items:
            try:
                _marker_threshold(item, self.settings.threshold)
            except pytest.UsageError as exc:
                if not self.is_worker:
                    raise
                item.stash[_MARKER_ERROR] = str(exc)  # fails the test in setup
        if self.settings.enabled:
            timed: list[pytest.Item] = []
            profiled: list[pytest.Item] = []
            for item in items:
                (profiled if "gpu_profile" in getattr(item, "fixturenames", ()) else timed).append(item)
            items[:] = timed + profiled

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        """Run a timed test's body on a CUDA stream of its own rather than the legacy default stream.
        Why: a backward timed with torch.autograd.grad runs on the stream its forward ran on, and a
        CUDA graph cannot take in work on the legacy default stream ("operation would make the legacy
        stream depend on a capturing blocking stream"), so a short backward could only be timed as
        queued eager calls. The stream waits for the default stream first (inputs made by fixtures),
        and the default stream for it after (teardown and later tests)."""
        torch = sys.modules.get("torch")
        if not (self.settings.enabled and "gpu_benchmark" in getattr(item, "fixturenames", ())
                and torch is not None and has_cuda()):
            yield
            return
        default = torch.cuda.current_stream()
        if default.device not in self._test_streams:
            self._test_streams[default.device] = torch.cuda.Stream(default.device)
        stream = self._test_streams[default.device]
        stream.wait_stream(default)
        with torch.cuda.stream(stream):
            yield
        default.wait_stream(stream)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if _MARKER_ERROR in item.stash:
            pytest.fail(item.stash[_MARKER_ERROR], pytrace=False)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = {item.nodeid for item in session.items}

    def missing(self) -> list[str]:
        """Baseline entries of tests collected in this session that produced no measurement."""
        if self.baseline is None or not self.settings.compare:
            return []
        return sorted(k for k in self.baseline.entries if k in self.collected and k not in self.results)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker or not self.settings.enabled:
            return
        from . import report

        results = list(self.results.values())
        s = self.settings
        sw = software_versions()
        stored = self.baseline.device.get("peaks") if self.baseline else None
        device = dict(self.device, peaks=merged_peaks(stored, self.peaks.values))
        errors = []

        def save() -> None:
            entries = {r["nodeid"]: baseline_mod.entry_from_result(r) for r in results
                       if r.get("body_passed") and r["median_ms"] > 0}
            baseline_mod.save(self.baseline_path, device, sw, entries)
            self.saved = len(entries)

        outputs = [(s.save and results, save),
                   (s.json_path, lambda: report.write_json(s.json_path, results, device, sw, self.started_at)),
                   (s.markdown_path, lambda: report.write_markdown(s.markdown_path, results, device, sw)),
                   (s.plot_dir, lambda: report.write_plots(s.plot_dir, results, self.baseline, device=device))]
        for wanted, write in outputs:
            if not wanted:
                continue
            try:
                write()
            except ImportError as exc:
                errors.append(f"{exc} (plots need matplotlib: pip install 'pytest-gpuperf[plot]')")
            except (baseline_mod.BaselineError, OSError, ValueError) as exc:
                errors.append(str(exc))
        if errors:
            self.write_error = "; ".join(errors)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        if self.is_worker or not self.settings.enabled:
            return
        from . import report

        tr = terminalreporter
        results = list(self.results.values())
        if results:
            tr.write_sep("=", "gpuperf results")
            for line in report.terminal_lines(results, self.device, width=tr._tw.fullwidth):
                tr.write_line(line)
        missing = self.missing()
        if missing:
            tr.write_line(f"gpuperf: {len(missing)} baseline entries collected but not measured (missing): "
                          + ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else ""))
        if results:
            tr.write_line(report.time_line(results, time.perf_counter() - self._t0))
        regressions = [r for r in results if r.get("regression")]
        if regressions:
            tr.write_line(f"gpuperf: {len(regressions)} regression(s) against {self.baseline_path}",
                          red=True, bold=True)
        if self.write_error:
            tr.write_line(f"gpuperf: could not write results: {self.write_error}", red=True, bold=True)
        elif self.saved is not None:
            tr.write_line(f"gpuperf: saved {self.saved} entries to {self.baseline_path}")


# --------------------------------------------------------------------------------------------
# the gpu_benchmark fixture
# --------------------------------------------------------------------------------------------
def _float_dtype(args: Any) -> str | None:
    """Name of the precision that bounds a call's arithmetic: the first floating tensor's dtype,
    'tf32' for float32 when torch may use tf32 matmuls."""
    for t in iter_tensors(args):
        if t.is_floating_point():
            name = str(t.dtype).removeprefix("torch.")
            if name == "float32" and t.is_cuda:
                import torch

                if torch.backends.cuda.matmul.allow_tf32:
                    return "tf32"
            return name
    return None


_MARKER_KEYS = ("threshold", "group")


def _marker_threshold(item: pytest.Item, default: float) -> float:
    """The test's @pytest.mark.gpuperf(threshold=...) or the session's threshold; anything else in the
    marker (a misspelt keyword, a positional value) is a usage error rather than a silent default."""
    marker = item.get_closest_marker("gpuperf")
    if marker and (marker.args or set(marker.kwargs) - set(_MARKER_KEYS)):
        given = [repr(a) for a in marker.args] + [f"{k}=" for k in marker.kwargs if k not in _MARKER_KEYS]
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.gpuperf takes only threshold= and group=, "
                                f"got {', '.join(given)}")
    value = marker.kwargs.get("threshold") if marker else None
    if value is None:
        return default
    try:
        return compare.parse_threshold(str(value))
    except ValueError as exc:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.gpuperf(threshold=...): {exc}") from None


class GpuBenchmark:
    """Call it like the function it measures: `out = gpu_benchmark(fn, *args, bytes=..., flops=...)`."""

    def __init__(self, perf: GpuPerf, item: pytest.Item) -> None:
        self._perf = perf
        self._item = item
        self.stats: dict[str, Any] | None = None
        self.measurement: Measurement | None = None
        self._called = False

    def __call__(self, fn: Callable[..., Any], *args: Any, bytes: int | None = None, flops: int | None = None,
                 **kwargs: Any) -> Any:
        __tracebackhide__ = True
        for label, value in (("bytes", bytes), ("flops", flops)):
            if value is not None and not is_nonnegative_number(value):
                raise ValueError(f"gpu_benchmark in {self._item.nodeid}: {label}={value!r} must be a number >= 0")
        if self._called:
            raise RuntimeError(f"gpu_benchmark was already called in {self._item.nodeid}; "
                               "call it once per test (parametrize for more cases)")
        self._called = True
        call = functools.partial(fn, *args, **kwargs)
        with _oom_is_skip(self._item.nodeid):
            if not self._perf.settings.enabled:
                return call()
            record, measurement = self._measure(call, (args, kwargs), bytes, flops)
        self.stats = record
        self.measurement = measurement
        self._item.stash[_ITEM_RECORD] = record
        for warning in measurement.warnings:
            self._item.warn(pytest.PytestWarning(f"gpuperf: {warning}"))
        value, measurement.value = measurement.value, None  # the test owns the result; don't pin it
        return value

    def _measure(self, call: Callable[[], Any], inputs: Any, nbytes: int | None,
                 flops: int | None) -> tuple[dict, Measurement]:
        perf, settings = self._perf, self._perf.settings
        threshold = self._threshold()
        base = None
        if settings.compare and perf.baseline is not None:
            base = perf.baseline.entries.get(self._item.nodeid)
        totals = {"wall_s": 0.0, "measured_s": 0.0, "first_call_s": 0.0}  # all attempts: the test's cost

        def run() -> tuple[dict, Measurement]:
            measurement = measure(call, settings.timing, inputs=inputs, prefer=(base or {}).get("method"))
            for key in totals:
                totals[key] += getattr(measurement, key)
            return self._record(measurement, inputs, nbytes, flops), measurement

        record, measurement, verdict, attempt = compare.remeasure_while_suspect(
            base, run, threshold, settings.retries, judging=settings.compare,
            runs=compare.recording_runs(settings.retries) if settings.save else 1)
        record["remeasured"] = attempt
        record.update(totals)
        record["threshold"] = threshold
        record["baseline"] = base
        if verdict is not None:
            record.update(verdict=verdict.time, memory_verdict=verdict.memory, change=verdict.change,
                          memory_change=verdict.memory_change, noise_bound=verdict.noise_bound,
                          fixed_bound=verdict.fixed_bound,
                          message=verdict.message,
                          regression=compare.is_regression(verdict))
        perf.store_peaks()
        return record, measurement

    def _threshold(self) -> float:
        return _marker_threshold(self._item, self._perf.settings.threshold)

    def _record(self, m: Measurement, inputs: Any, nbytes: int | None, flops: int | None) -> dict[str, Any]:
        s = m.stats
        seconds = s.median_ms / 1e3
        # plain ints: numpy scalars (np.prod(shape) * 4) can't cross to an xdist controller
        nbytes = None if nbytes is None else int(nbytes)
        flops = None if flops is None else int(flops)
        gbps = nbytes / seconds / 1e9 if nbytes and seconds > 0 else None
        tflops = flops / seconds / 1e12 if flops and seconds > 0 else None
        pct = bound = None
        if m.method != "cpu" or not has_cuda():
            fractions = {}
            if gbps is not None:
                fractions["memory"] = gbps / self._perf.peaks.copy_gbps()
            dtype = _float_dtype(inputs) if tflops is not None else None
            if dtype is not None:
                fractions["compute"] = tflops / self._perf.peaks.matmul_tflops(dtype)
            if fractions:
                bound = max(fractions, key=fractions.get)  # the roofline side the call is nearer to
                pct = 100 * fractions[bound]
        item = self._item
        marker = item.get_closest_marker("gpuperf")
        name = getattr(item, "originalname", item.name)
        return {
            "nodeid": item.nodeid, "name": name,
            "param": item.callspec.id if hasattr(item, "callspec") else "",
            "group": (marker.kwargs.get("group") if marker else None) or name,
            "median_ms": s.median_ms, "mean_ms": s.mean_ms, "min_ms": s.min_ms, "max_ms": s.max_ms,
            "stddev_ms": s.stddev_ms, "q1_ms": s.q1_ms, "q3_ms": s.q3_ms, "noise": s.noise,
            "ci_ms": list(s.ci_ms), "samples": s.samples, "gbps": gbps, "tflops": tflops, "pct_of_peak": pct,
            "bytes": nbytes, "flops": flops, "bound": bound, "peak_memory_bytes": m.peak_memory_bytes,
            "method": m.method, "calls_per_sample": m.calls_per_sample, "cache": m.cache, "timing": TIMING_VERSION,
            "node_gap_ms": m.node_gap_ms,
            "sm_clock_mhz": m.sm_clock_mhz, "throttle": m.throttle, "warnings": m.warnings,
            "wall_s": m.wall_s, "measured_s": m.measured_s, "data": m.samples_ms,
        }


class _oom_is_skip:
    """Turn a CUDA out-of-memory error into a skip that names the test and the allocation."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> bool:
        torch = sys.modules.get("torch")
        if exc is None or torch is None or not isinstance(exc, torch.cuda.OutOfMemoryError):
            return False
        torch.cuda.empty_cache()
        pytest.skip(f"CUDA out of memory in {self.nodeid}: {str(exc).splitlines()[0]}")
        return True  # pragma: no cover - pytest.skip raises


@pytest.fixture
def gpu_benchmark(request: pytest.FixtureRequest) -> GpuBenchmark:
    """Measure a GPU call (warm-up, CUDA events or graphs, L2 flush, adaptive samples) under --gpuperf;
    otherwise call it once. Returns the call's result; `.stats` holds the measurement."""
    return GpuBenchmark(request.config.stash[_STATE], request.node)


@pytest.fixture
def gpu_profile(request: pytest.FixtureRequest):
    """`gpu_profile(fn, *args, **kwargs)` -> Profile of one warm call (kernels, launches, CUDA time)."""
    from .profile import Profile, capture

    perf: GpuPerf = request.config.stash[_STATE]
    exported: list[Path] = []

    def run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Profile:
        if not has_cuda():
            pytest.skip("gpu_profile needs a CUDA device; none is visible")
        prof = capture(functools.partial(fn, *args, **kwargs))
        if perf.settings.trace_dir is not None:
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid).strip("_")
            suffix = f"-{len(exported) + 1}" if exported else ""
            exported.append(prof.export_chrome_trace(perf.settings.trace_dir / f"{stem}{suffix}.json"))
        return prof

    return run


@pytest.fixture
def gpu_assert_close():
    """`gpu_assert_close(actual, expected, *, rtol=None, atol=None, precision=None)` with per-dtype defaults."""
    from .tolerance import assert_close

    return assert_close


# --------------------------------------------------------------------------------------------
# hooks
# --------------------------------------------------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpuperf(threshold=None, group=None): per-test regression threshold "
                                       "(e.g. '10%') and report group")
    settings = Settings.from_config(config)
    controller = not hasattr(config, "workerinput")  # warn once, not once per xdist worker too
    if not settings.enabled and controller:
        given = [f"--{opt.replace('_', '-')}" for opt in ("gpuperf_save", "gpuperf_json", "gpuperf_markdown",
                                                            "gpuperf_plot") if config.getoption(opt)]
        if given:
            config.issue_config_time_warning(pytest.PytestConfigWarning(
                f"{', '.join(given)} without --gpuperf: nothing is measured, so nothing is saved or written"),
                stacklevel=2)
    workers = getattr(config.option, "numprocesses", None)  # pytest-xdist's -n: a count, or "auto"/"logical"
    shared = workers not in (None, 0, 1)
    if settings.enabled and shared and controller and not has_cuda():
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            f"--gpuperf on the CPU with -n {workers}: the workers time on shared cores, so each one's "
            "medians include the others' load and can fail the gate"), stacklevel=2)
    perf = GpuPerf(config, settings)
    stale = perf.stale_entries()
    if stale and settings.compare and controller:
        versions = {name: recorded_version(perf.baseline.entries[name]) for name in stale}
        newer = [name for name, v in versions.items() if v is not None and v > TIMING_VERSION]
        example = newer[0] if newer else stale[0]
        advice = ("upgrade pytest-gpuperf to compare against them" if newer else
                  "their comparisons include that difference" + (
                      "; this run's --gpuperf-save records the tests it runs anew" if settings.save
                      else ": record them again (--gpuperf-save)"))
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            f"gpuperf: {len(stale)} of {len(perf.baseline.entries)} entries of {perf.baseline_path} were timed "
            f"with another timing version (e.g. {example}: {version_note(perf.baseline.entries[example])}); {advice}"),
            stacklevel=2)
    config.stash[_STATE] = perf
    config.pluginmanager.register(perf, "gpuperf-session")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Wrap each test in an NVTX range named after its node id, so `nsys profile pytest` reads well."""
    torch = sys.modules.get("torch")
    nvtx = torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized()
    if nvtx:
        torch.cuda.nvtx.range_push(item.nodeid)
    try:
        yield
    finally:
        if nvtx:
            torch.cuda.nvtx.range_pop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Attach the result record to the call report and fail a test whose measurement regressed."""
    outcome = yield
    rep: pytest.TestReport = outcome.get_result()
    record = item.stash.get(_ITEM_RECORD, None)
    if rep.when != "call" or record is None:
        return
    record["body_passed"] = rep.passed
    rep.user_properties.append((RECORD, record))
    if rep.passed and record.get("regression"):
        rep.outcome = "failed"
        rep.longrepr = f"gpuperf regression: {record['message']}"


def _current_index() -> int | None:
    if not has_cuda():
        return None
    import torch

    return torch.cuda.current_device()
