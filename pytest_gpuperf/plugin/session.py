"""The session object: everything one pytest process knows about a run (settings, device, peaks,
calibration, baseline, results), and the hooks that collect results and write the outputs.

Results travel to the controller as plain records in `report.user_properties`, which is how
pytest-xdist workers' results reach one summary, one JSON file and one baseline.
"""
from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..core.counters import Counters
from ..core.records import Result
from ..core.timeline import Timeline
from ..core.units import as_number, plural
from ..core.versions import version_note
from ..measure import calibration, node_gap
from ..measure.device import describe, has_cuda, l2_cache_bytes, read_clocks, software_versions
from ..measure.peaks import (Peaks, cache_key as peak_cache_key, device_kind, merged_peaks, same_stack,
                             valid_peaks)
from ..store import baseline as baseline_mod
from .options import Settings, marker_threshold
from .outputs import write_failure
from .shard import Sharding, by_recorded_time
from .workers import (LOAD_INPUT, end_without_teardown, gpu_count, load_distribution, sharing_message,
                      xdist_share, xdist_workers)

RECORD = "gpuperf"  # user_properties key of a test's result record
STATE = pytest.StashKey["GpuPerf"]()
ITEM_RECORD = pytest.StashKey[dict]()
MARKER_ERROR = pytest.StashKey[str]()


class GpuPerf:
    """Everything one pytest process knows about the run: settings, device, peaks, baseline, results."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.is_worker = hasattr(config, "workerinput")
        self.results: dict[str, dict] = {}
        self.started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._t0 = time.perf_counter()
        self._epoch0 = time.time()  # the test reports' clock
        #: perf_counter when the counting after timing began: the time line's span ends there
        self._timed_until: float | None = None
        self.timeline = Timeline()  # the tests' phases, for where the time outside measurements went
        self._peaks: Peaks | None = None
        self._stored_peaks: dict[str, float] = {}
        self.collected: set[str] = set()
        self.saved: int | None = None
        self.write_error: str | None = None
        self.written: list[str] = []  # the outputs written, but for the baseline
        self.device: dict[str, Any] = {}
        self.baseline: baseline_mod.Baseline | None = None
        self.shard = Sharding(config, settings.shard) if settings.shard is not None else None
        #: hardware counters per test id, from the counting pass (--gpuperf-counters)
        self.counters: dict[str, Counters] = {}
        self.counter_note: str | None = None  # what the counting pass did, or why it gave nothing
        self._counter_file: Path | None = None  # the counters, for pytest-xdist's workers
        self._windows = 0  # calls counted so far, in the counting process
        if self.is_worker and config.workerinput.get(COUNTERS_INPUT):
            self.counters = read_counters(Path(config.workerinput[COUNTERS_INPUT]))
        # The process's default calibration, so direct measure() calls in tests share it.
        self.calibration = calibration.default()
        if settings.enabled:
            if self._counting():
                self._count_before_timing()  # first: a GPU child started after this process chose its device
            self._select_device()            # moved graph-timed readings (docs/measurement.md)
            self.device = describe()
            self.baseline = self._load_baseline()

    def _select_device(self) -> None:
        """Make the device of this process (--gpuperf-device, an xdist worker's own) current, after
        looking up its graph node gap."""
        if not has_cuda():
            return
        import torch

        count = torch.cuda.device_count()
        index = self.settings.device_index
        if index is None and self.is_worker:
            worker, workers = xdist_share(self.config)
            message = sharing_message(workers, count)
            if message:  # the controller refuses first (workers.refuse_gpu_sharing); a worker's own
                raise pytest.UsageError(message)  # view counts where its GPUs differ
            index = worker % count
        if index is not None and index >= count:
            raise pytest.UsageError(f"--gpuperf-device: device {index} does not exist ({count} visible)")
        timing = self._times_here()
        if timing:
            # First: a process that started the gap's child after selecting and describing the device
            # read every graph-timed call ~0.35 µs apart from all others (docs/measurement.md).
            node_gap.lookup(torch.cuda.current_device() if index is None else index)
        if index is not None:
            torch.cuda.set_device(index)
        if timing:
            # The tests' stream, which is the timer's own: measure() calls in tests stay on it.
            self.calibration.stream(torch, torch.cuda.current_device())

    def _times_here(self) -> bool:
        """Does this process time tests: not one that only lists them, nor the counting pass, nor the
        controller of pytest-xdist's workers (each worker measures its own GPU's node gap)?"""
        return not (self._listing() or self.settings.counter_pass is not None or self._xdist_controller())

    def _listing(self) -> bool:
        """Does this process only list tests or fixtures (--collect-only, --fixtures, --setup-plan,
        --setup-only, --help, --version)?"""
        return any(getattr(self.config.option, name, False)
                   for name in ("collectonly", "showfixtures", "setupplan", "setuponly", "help", "version"))

    def _xdist_controller(self) -> bool:
        """Is this the controller of pytest-xdist's workers, which runs no test itself?"""
        return not self.is_worker and xdist_workers(self.config) > 0

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
        """Measured peaks, kept in pytest's cache per device and software stack so runs share them,
        and taken from the baseline where it was recorded under this stack (a fresh machine, each of
        pytest-xdist's workers, then measures none); implausible values are not used (peaks.Peaks
        re-measures them)."""
        if self._peaks is None:
            cache = getattr(self.config, "cache", None)
            stored = cache.get(self._peaks_key(), {}) if cache is not None else {}
            self._stored_peaks = dict(stored) if isinstance(stored, dict) else {}
            known = merged_peaks(self._baseline_peaks(), self._stored_peaks)
            self._peaks = Peaks(known, calibration=self.calibration, kind=device_kind(self.device),
                                source=str(self._peaks_file()) if cache is not None else "")
        return self._peaks

    def _baseline_peaks(self, any_stack: bool = False) -> dict[str, float]:
        """The baseline's plausible peaks, if it was recorded under this software stack (or
        `any_stack`), else none."""
        base = self.baseline
        stored = base.device.get("peaks") if base is not None else None
        if not isinstance(stored, dict):
            return {}
        if not any_stack and not (isinstance(base.software, dict) and same_stack(software_versions(), base.software)):
            return {}
        return valid_peaks(stored, device_kind(self.device))[0]

    def _peaks_key(self) -> str:
        return peak_cache_key(self.device["key"], software_versions())

    def _peaks_file(self) -> Path:
        """Where pytest's cache keeps the peaks (its documented layout: <cache_dir>/v/<key>)."""
        return self.config.rootpath / self.config.getini("cache_dir") / "v" / self._peaks_key()

    def store_peaks(self) -> None:
        """Write newly measured peaks to pytest's cache (once per change, not once per test); peaks
        measured under load are not cached, and cached values found implausible are replaced."""
        cache = getattr(self.config, "cache", None)
        recordable = self.peaks.recordable()
        if cache is not None and recordable != self._stored_peaks:
            cache.set(self._peaks_key(), recordable)
            self._stored_peaks = recordable

    def _peaks_to_record(self) -> dict[str, float]:
        """The device peaks for this run's baseline: the stored ones still plausible, updated with
        this run's undisturbed ones."""
        return merged_peaks(self._baseline_peaks(any_stack=True), self.peaks.recordable())

    def count(self, nodeid: str, call) -> Any:
        """In the counting process: count the calls of `nodeid` (measure.counters.count_call)."""
        from ..measure.counters import COUNTED_CALLS, count_call

        self._windows += COUNTED_CALLS
        return count_call(call, self._windows - COUNTED_CALLS, nodeid, self.settings.counter_pass)

    def _counting(self) -> bool:
        """Does this process run the counting pass: the controller of a run that times tests, not
        one that only lists them?"""
        s = self.settings
        return s.counters and s.counter_pass is None and not self.is_worker and not self._listing()

    def _say(self) -> Callable[[str], None]:
        """A line to the terminal (or stderr where there is no terminal reporter)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        return reporter.write_line if reporter is not None else (lambda line: print(line, file=sys.stderr))

    def _count_before_timing(self) -> None:
        """Run the counting pass (--gpuperf-counters) and keep its counters; where it cannot run,
        one line says why and the timing run goes on without counters."""
        from ..measure.counters import CounterError, run_counting

        say = self._say()
        try:
            run = run_counting(self.config.invocation_params.args, self.config.invocation_params.dir,
                               self.config.pluginmanager.hasplugin("xdist"), say)
        except CounterError as exc:
            self.counter_note = f"no counters: {exc}; timing goes on without them"
        else:
            self.counters = run.counters
            self.counter_note = (f"counters of {plural(len(run.counters), 'call')} "
                                 f"({plural(run.kernels, 'kernel')}) counted before "
                                 f"timing in {run.cost_text()}")
        say(f"gpuperf: {self.counter_note}")

    def _count_undecided(self, session: pytest.Session) -> None:
        """--gpuperf-count-undecided: count the tests time could not decide, one process per GPU the
        run timed on, and judge them again (plugin/undecided.py); counters that say a test did more
        work fail the session, its test having passed already. A session stopped early (Ctrl-C,
        --maxfail, -x) counts nothing."""
        from ..measure import counters as counting
        from .undecided import count_undecided, counting_devices, refusal

        stopped = session.shouldstop or session.shouldfail or session.exitstatus not in (
            pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        self.counter_note = ("count-undecided: the session stopped early; nothing counted" if stopped
                             else refusal(self.results, self.settings.compare))
        if self.counter_note:
            return
        self._timed_until = time.perf_counter()  # the counting's time is its note's
        torch = sys.modules.get("torch")
        controller = self._xdist_controller()
        if torch is not None and has_cuda() and not controller:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()  # the counting process needs the memory this one cached
        devices = counting_devices(self.settings.device_index, controller, xdist_workers(self.config), gpu_count())
        recount = count_undecided(self.results, counting.run_counting, self.config.invocation_params.args,
                                  self.config.invocation_params.dir, self.config.pluginmanager.hasplugin("xdist"),
                                  devices, self._say(), self.settings.threshold, l2_cache_bytes())
        self.counter_note = recount.note()
        if recount.more_work and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    # -- hooks of the registered session object -------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        """pytest-xdist: each worker reads the counting pass's counters from one file, and learns
        whether the tests are handed out in the order it collects them."""
        if self.counters and self._counter_file is None:
            self._counter_file = write_counters(self.counters)
        if self._counter_file is not None:
            node.workerinput[COUNTERS_INPUT] = str(self._counter_file)
        node.workerinput[LOAD_INPUT] = load_distribution(self.config)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if not self.settings.enabled:
            return ["gpuperf: off (gpu_benchmark calls run once as correctness tests; --gpuperf to measure)"]
        d, sw, s = self.device, software_versions(), self.settings
        index = _current_index()
        clock = read_clocks(index).sm_clock_mhz
        base = self.baseline
        stale = len(self.stale_entries())
        stored = (f"{self.baseline_path} ({plural(len(base.entries), 'entry', 'entries')}"
                  + (f", {stale} measured with another timing version" if stale else "") + ")"
                  if base else f"none yet at {self.baseline_path}")
        arch = f", sm_{d['capability'].replace('.', '')}, {d['sm_count']} SMs" if d.get("capability") else ""
        return [
            f"gpuperf: {d['name']} [{d['key']}]{arch}" + (f", SM clock {clock} MHz" if clock else "")
            + f"; torch {sw.get('torch')}, triton {sw.get('triton')}, CUDA {sw.get('cuda')}, driver {sw.get('driver')}",
            f"gpuperf: cache={s.timing.cache}, threshold={s.threshold:.1%}, precision={s.timing.precision:.2%}, "
            f"budget={s.timing.budget_s:g}s; baseline: {stored}" + ("" if s.compare else " (not compared)"),
        ] + ([f"gpuperf: {self._node_gap_line(index)}"]
             if index is not None and s.counter_pass is None else [])

    def _node_gap_line(self, index: int) -> str:
        """The header's node-gap line; a session that times nothing here does not measure the gap."""
        if self._times_here():
            return node_gap.lookup(index).describe()
        gap = node_gap.known(index)
        return gap.describe() if gap else ("graph node gap: not measured yet on this GPU (a ~15 s CUPTI "
                                           "measurement before the first test is timed)")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect result records (from this process or, under xdist, from the workers)."""
        start, stop = getattr(report, "start", None), getattr(report, "stop", None)
        if start is not None and stop is not None:
            self.timeline.add(str(getattr(report, "worker_id", "") or "main"), report.nodeid, start, stop,
                              report.duration)
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
        torch.profiler leaves CUPTI attached to the process, which slows every later launch. A
        `gpuperf ab` round runs only the tests its plan lists, and the counting process only the
        tests that use gpu_benchmark. Before those, --gpuperf-shard keeps its shard of the tests -k/-m
        left, so every process of a shard (a counting pass, xdist's workers) cuts the same part. Under
        pytest-xdist's load distribution the workers order the timed and the profiled tests each
        longest first by recorded time, the order in which the controller hands them out."""
        if self.shard is not None:
            self._deselect(items, self.shard.cut(items, self.baseline.entries if self.baseline else {}))
        plan = self.settings.plan
        if plan is not None and plan.select is not None:
            keep = set(plan.select)
            self._deselect(items, [item for item in items if item.nodeid not in keep])
        if self.settings.counter_pass is not None:
            self._deselect(items, [item for item in items if "gpu_benchmark" not in getattr(item, "fixturenames", ())])
        for item in items:
            try:
                marker_threshold(item, self.settings.threshold)
            except pytest.UsageError as exc:
                if not self.is_worker:
                    raise
                item.stash[MARKER_ERROR] = str(exc)  # fails the test in setup
        if self.settings.enabled:
            timed: list[pytest.Item] = []
            profiled: list[pytest.Item] = []
            for item in items:
                (profiled if "gpu_profile" in getattr(item, "fixturenames", ()) else timed).append(item)
            if self.is_worker and load_distribution(self.config):
                entries = self.baseline.entries if self.baseline else {}
                timed, profiled = by_recorded_time(timed, entries), by_recorded_time(profiled, entries)
            items[:] = timed + profiled

    @contextlib.contextmanager
    def _on_session_stream(self) -> Iterator[None]:
        """Under --gpuperf on CUDA (not --collect-only, which times nothing), what runs inside runs on
        the session's stream (the timer's own), ordered after the work queued outside it, such as
        tensors made at import, and before what follows."""
        torch = sys.modules.get("torch")
        if not (self.settings.enabled and not self.config.option.collectonly and not self._xdist_controller()
                and torch is not None and has_cuda()):
            yield
            return
        with self.calibration.on_stream(torch, torch.cuda.current_device()):
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_collection(self, session: pytest.Session):
        """Collection (test modules' imports, collection hooks such as the suite's Triton dry run)
        runs on the session's stream too: large kernels on another stream left every graph node the
        tests replayed ~0.17 µs longer, and a call of one kernel read ~0.35 µs high, on an H100
        (docs/measurement.md)."""
        with self._on_session_stream():
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        """Under --gpuperf on CUDA, run every test whole (fixture setup, body, teardown) on one CUDA
        stream of the session's, not the legacy default stream, which no CUDA graph can capture work
        from (a backward runs on its forward's stream). Whole tests, not just bodies: autograd then
        sees one stream, so a leaf used in a fixture never gets a gradient from another stream and
        torch's AccumulateGrad stream-mismatch warning has no cause (docs/measurement-evidence.md)."""
        with self._on_session_stream():
            yield

    def _deselect(self, items: list[pytest.Item], dropped: list[pytest.Item]) -> None:
        if dropped:
            gone = {id(item) for item in dropped}
            items[:] = [item for item in items if id(item) not in gone]
            self.config.hook.pytest_deselected(items=dropped)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if MARKER_ERROR in item.stash:
            pytest.fail(item.stash[MARKER_ERROR], pytrace=False)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = {item.nodeid for item in session.items}

    def missing(self) -> list[str]:
        """Baseline entries of tests collected in this session that produced no measurement."""
        if self.baseline is None or not self.settings.compare:
            return []
        return sorted(k for k in self.baseline.entries if k in self.collected and k not in self.results)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self._counter_file is not None:
            self._counter_file.unlink(missing_ok=True)
        ended_normally = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        if self.is_worker and self.settings.enabled and ended_normally:
            end_without_teardown()
        if self.is_worker or not self.settings.enabled:
            return
        if self.settings.count_undecided and self.results:
            self._count_undecided(session)
        from ..report.markdown import write_markdown
        from ..report.plots import write_plots
        from ..report.roofline import write_rooflines
        from ..store.results import write_json

        records = list(self.results.values())
        for record in records:  # what each test cost in all: `gpuperf ab --budget` plans its rounds with it
            record["test_s"] = self.timeline.test_s.get(record["nodeid"])
        results = [Result.from_dict(r) for r in records]
        s = self.settings
        sw = dict(software_versions())
        self.config.hook.pytest_gpuperf_run_info(config=self.config, info=sw)
        device = dict(self.device, peaks=self._peaks_to_record())
        errors = []

        def save() -> None:
            entries = {r.id.nodeid: r for r, record in zip(results, records)
                       if record.get("body_passed") and r.stats.median_ms > 0}
            baseline_mod.save(self.baseline_path, device, sw, entries)
            self.saved = len(entries)

        # Each output is written or fails on its own, and the summary names every one written.
        outputs = [("--gpuperf-save", s.save and results and self.baseline_path, save),
                   ("--gpuperf-json", s.json_path,
                    lambda: write_json(s.json_path, results, device, sw, self.started_at,
                                       shard=self.shard.record if self.shard else None)),
                   ("--gpuperf-markdown", s.markdown_path,
                    lambda: write_markdown(s.markdown_path, results, device, sw)),
                   ("--gpuperf-plot", s.plot_dir,
                    lambda: (write_plots(s.plot_dir, results, self.baseline, device=device),
                             write_rooflines(s.plot_dir, results, device)))]
        for where, path, write in outputs:
            if not path:
                continue
            try:
                write()
            except baseline_mod.BaselineError as exc:
                errors.append(str(exc))  # it names the baseline file
            except (ImportError, OSError, ValueError) as exc:
                errors.append(write_failure(where, path, exc))
            else:
                if where != "--gpuperf-save":  # the summary's saved line names the baseline
                    self.written.append(str(path))
        if errors:
            self.write_error = "; ".join(errors)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        self.config.hook.pytest_gpuperf_results(config=self.config, results=[dict(r) for r in records],
                                                device=device, software=sw)

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        if self.is_worker or not self.settings.enabled:
            return
        from ..report.rows import counters_line, first_calls_lines, replay_line, time_line
        from ..report.table import terminal_lines

        tr = terminalreporter
        results = [Result.from_dict(r) for r in self.results.values()]
        if results:
            tr.write_sep("=", "gpuperf results")
            for line in terminal_lines(results, self.device, width=config.get_terminal_writer().fullwidth):
                tr.write_line(line)
        missing = self.missing()
        if missing:
            tr.write_line(f"gpuperf: {plural(len(missing), 'baseline entry', 'baseline entries')} collected but "
                          f"not measured (missing): "
                          + ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else ""))
        if results:
            workers = xdist_workers(config)
            until = self._timed_until or time.perf_counter()
            outside = self.timeline.outside(self._epoch0, self._epoch0 + until - self._t0, workers,
                                            {r.id.nodeid: as_number(r.wall_s) or 0.0 for r in results})
            tr.write_line(time_line(results, until - self._t0, processes=workers, outside=outside))
            for line in first_calls_lines(results):
                tr.write_line(line)
            work = counters_line(results) if self.settings.compare else None
            if work:
                tr.write_line(work)
        if self.counter_note:
            tr.write_line(f"gpuperf: {self.counter_note}")
        if results:
            replayed = replay_line(results)
            if replayed:
                tr.write_line(replayed)
        regressions = [r for r in results if r.judged.regression]
        if regressions:
            tr.write_line(f"gpuperf: {plural(len(regressions), 'regression')} against {self.baseline_path}",
                          red=True, bold=True)
        if self.saved is not None:
            tr.write_line(f"gpuperf: saved {plural(self.saved, 'entry', 'entries')} to {self.baseline_path}")
        if self.written:
            tr.write_line(f"gpuperf: wrote {', '.join(self.written)}")
        if self.write_error:
            tr.write_line(f"gpuperf: could not write results: {self.write_error}", red=True, bold=True)


#: pytest-xdist workerinput key of the counters file.
COUNTERS_INPUT = "gpuperf_counters"


def write_counters(counters: dict[str, Counters]) -> Path:
    """The counters in a temporary JSON file (test id -> counters) for the workers to read."""
    import json
    import tempfile

    fd, name = tempfile.mkstemp(prefix="gpuperf-counters-", suffix=".json")
    with open(fd, "w", encoding="utf-8") as out:
        json.dump({k: v.to_dict() for k, v in counters.items()}, out)
    return Path(name)


def read_counters(path: Path) -> dict[str, Counters]:
    """What write_counters wrote; an unreadable file gives no counters."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {k: c for k, v in data.items() if (c := Counters.from_dict(v)) is not None}
    except (OSError, ValueError, AttributeError):
        return {}


def _current_index() -> int | None:
    if not has_cuda():
        return None
    import torch

    return torch.cuda.current_device()
