"""pytest-gpuperf's pytest plugin (the `pytest11` entry point): options, hooks and fixtures.

Without --gpuperf every `gpu_benchmark` call runs its function once and returns the result, so the
same tests are correctness tests on any machine. With --gpuperf each call is measured, judged
against this device's baseline (a suspect result is re-measured before it fails), and reported.
"""
from __future__ import annotations

import sys

import pytest

from ..core.units import plural
from ..core.versions import TIMING_VERSION, recorded_version, version_note
from ..measure.device import has_cuda
from . import compile_cache
from .compile_cache import COMPILE_CACHE
from .fixtures import GpuBenchmark, gpu_assert_close, gpu_benchmark, gpu_profile
from .options import Settings, add_options
from .session import ITEM_RECORD, RECORD, STATE, GpuPerf
from .workers import dispatch_one_at_a_time, refuse_gpu_sharing

__all__ = ["GpuBenchmark", "GpuPerf", "Settings", "gpu_assert_close", "gpu_benchmark", "gpu_profile",
           "pytest_addhooks", "pytest_addoption", "pytest_configure", "pytest_load_initial_conftests",
           "pytest_report_header", "pytest_runtest_call",
           "pytest_runtest_makereport"]

#: pytest-benchmark's --benchmark-timer value under --gpuperf on CUDA: a clock that synchronizes first.
SYNC_TIMER = "pytest_gpuperf.measure.timer.cuda_sync_timer"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """--gpuperf-compile-cache points the compile caches before conftests are imported or configured,
    where a suite may compile (compile_cache.py); --help and --version compile nothing."""
    ns = early_config.known_args_namespace
    if not (ns.help or ns.version):
        compile_cache.apply(early_config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    cache = config.stash.get(COMPILE_CACHE, None)
    return [cache.describe()] if cache is not None else []


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The pytest_gpuperf_* hooks other repositories implement (hookspec.py)."""
    from . import hookspec

    pluginmanager.add_hookspecs(hookspec)


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
    if settings.enabled and controller and settings.device_index is None:
        refuse_gpu_sharing(config)  # before xdist starts workers (its pytest_sessionstart)
    if settings.enabled and controller:
        dispatch_one_at_a_time(config)  # before xdist makes its scheduler (its pytest_sessionstart)
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
            f"gpuperf: {len(stale)} of {plural(len(perf.baseline.entries), 'entry', 'entries')} of "
            f"{perf.baseline_path} {'was' if len(stale) == 1 else 'were'} timed "
            f"with another timing version (e.g. {example}: {version_note(perf.baseline.entries[example])}); {advice}"),
            stacklevel=2)
    config.stash[STATE] = perf
    config.pluginmanager.register(perf, "gpuperf-session")
    if perf.shard is not None:
        config.pluginmanager.register(perf.shard, "gpuperf-shard")
    _use_sync_timer_for_pytest_benchmark(config, settings)


def _use_sync_timer_for_pytest_benchmark(config: pytest.Config, settings: Settings) -> None:
    """Under --gpuperf on CUDA, pytest-benchmark's `benchmark` fixture gets a synchronizing timer, set
    through its own --benchmark-timer option (read by its trylast pytest_configure, after this one)
    unless the command line gives one."""
    explicit = any(str(arg).startswith("--benchmark-timer") for arg in config.invocation_params.args)
    if settings.enabled and hasattr(config.option, "benchmark_timer") and not explicit and has_cuda():
        config.option.benchmark_timer = SYNC_TIMER


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
    record = item.stash.get(ITEM_RECORD, None)
    if rep.when != "call" or record is None:
        return
    record["body_passed"] = rep.passed
    rep.user_properties.append((RECORD, record))
    if rep.passed and record.get("regression"):
        rep.outcome = "failed"
        rep.longrepr = f"gpuperf regression: {record['message']}"
