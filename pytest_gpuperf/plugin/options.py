"""The plugin's command-line options and ini keys, validated into one Settings per session, and the
@pytest.mark.gpuperf marker's arguments."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from ..core.records import CacheMode
from ..core.shards import ShardSpec
from ..core.verdict import parse_threshold
from ..measure.timer import TimingConfig
from ..store.plan import Plan
from .outputs import check_outputs


def add_options(parser: pytest.Parser) -> None:
    """Register the gpuperf options and ini keys (pytest_addoption)."""
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
                    help="cold (default): no input in the L2 when a sample starts (a flush, or the previous "
                         "call for calls larger than the L2); warm: samples back to back")
    group.addoption("--gpuperf-device", metavar="N", help="CUDA device index (under xdist: worker k uses k %% count)")
    group.addoption("--gpuperf-precision", metavar="PCT",
                    help="stop sampling once the median's 95%% CI is within this (default 0.5%%)")
    group.addoption("--gpuperf-budget", metavar="SECONDS",
                    help="sampling time budget per measurement (default 1.0)")
    group.addoption("--gpuperf-counters", action="store_true",
                    help="also count each gpu_benchmark call's hardware counters (instructions, DRAM bytes) with "
                         "Nsight Compute, in a pass before timing, and judge them beside time")
    group.addoption("--gpuperf-count-undecided", action="store_true",
                    help="after timing, count with Nsight Compute only the tests whose time could not decide them "
                         "against the baseline (unsure, or a same that could not see the threshold) and judge them "
                         "by their counters (the slower ones too, to say whether the code did more work): far "
                         "cheaper than --gpuperf-counters where time decides most tests")
    group.addoption("--gpuperf-shard", metavar="K/N",
                    help="run shard K of N (K from 1): the tests left after -k/-m split into N disjoint parts, "
                         "balanced by the times recorded in this device's baseline (by count without one)")
    group.addoption("--gpuperf-compile-cache", metavar="DIR",
                    help="keep Triton's, Inductor's and torch extensions' compile caches (and the graph node gap) in "
                         "subfolders of DIR, e.g. for CI to cache; variables already set are kept "
                         "(default: ini gpuperf_compile_cache; neither: each library's own default)")
    group.addoption("--gpuperf-counter-pass", metavar="FILE",
                    help="(set by --gpuperf-counters for its counting process) count each call once, under ncu")
    group.addoption("--gpuperf-ab-plan", metavar="FILE",
                    help="(written by `gpuperf ab`) run only the tests it lists, timed the way it says")
    parser.addini("gpuperf_baseline_dir", "directory of <device-key>.yaml baselines", default="baselines")
    parser.addini("gpuperf_threshold", "slowdown that counts as a regression", default="5%")
    parser.addini("gpuperf_cache", "cold or warm L2 between samples", default="cold")
    parser.addini("gpuperf_precision", "target precision of the median (95% CI half-width)", default="0.5%")
    parser.addini("gpuperf_budget", "sampling time budget per measurement, seconds", default="1.0")
    parser.addini("gpuperf_compile_cache", "folder of the compile caches (relative to the rootdir)", default="")
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
    try:
        return CacheMode(text).value
    except ValueError:
        raise ValueError(f"{text!r} is not a cache mode; use cold or warm") from None


def _parse_shard(text: str | None) -> ShardSpec | None:
    if text is None:
        return None
    try:
        return ShardSpec.parse(text)
    except ValueError as exc:
        raise pytest.UsageError(f"--gpuperf-shard: {exc}") from None


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
    plan: Plan | None = None
    counters: bool = False  # count hardware counters in a pass before timing
    counter_pass: Path | None = None  # this process is that pass: its window file
    count_undecided: bool = False  # after timing, count the tests time could not decide (plugin/undecided.py)
    shard: ShardSpec | None = None  # run only this shard of the tests (--gpuperf-shard)

    @classmethod
    def from_config(cls, config: pytest.Config) -> "Settings":
        root = config.rootpath
        base_text, base_where = _setting(config, "gpuperf_baseline_dir", "gpuperf_baseline_dir")
        device = config.getoption("gpuperf_device")
        if device is not None and not str(device).isdigit():
            raise pytest.UsageError(f"--gpuperf-device: {device!r} is not a device index (0, 1, ...)")
        budget = _parse(config, "gpuperf_budget", "gpuperf_budget", _positive_float)
        path = lambda opt: None if config.getoption(opt) is None else Path(config.getoption(opt))  # noqa: E731
        plan = None
        if config.getoption("gpuperf_ab_plan") is not None:
            try:
                plan = Plan.read(path("gpuperf_ab_plan"))
            except ValueError as exc:
                raise pytest.UsageError(f"--gpuperf-ab-plan: {exc}") from None
        settings = cls(
            enabled=bool(config.getoption("gpuperf")),
            threshold=_parse(config, "gpuperf_threshold", "gpuperf_threshold", parse_threshold),
            timing=TimingConfig(
                cache=_parse(config, "gpuperf_cache", "gpuperf_cache", _cache_mode),
                precision=_parse(config, "gpuperf_precision", "gpuperf_precision", parse_threshold),
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
            plan=plan,
            counters=bool(config.getoption("gpuperf_counters")),
            counter_pass=path("gpuperf_counter_pass"),
            count_undecided=bool(config.getoption("gpuperf_count_undecided")),
            shard=_parse_shard(config.getoption("gpuperf_shard")),
        )
        for option, given in (("--gpuperf-counters", settings.counters),
                              ("--gpuperf-count-undecided", settings.count_undecided)):
            if given and not settings.enabled and not config.option.help:
                raise pytest.UsageError(f"{option}: counters are judged beside time; add --gpuperf")
        if settings.counters and settings.count_undecided:
            raise pytest.UsageError("--gpuperf-count-undecided: --gpuperf-counters already counts every test; "
                                    "give one of the two")
        if settings.enabled and settings.counter_pass is None:  # without --gpuperf nothing is written
            check_outputs([(base_where, settings.baseline_dir if settings.save else None, True),
                           ("--gpuperf-json", settings.json_path, False),
                           ("--gpuperf-markdown", settings.markdown_path, False),
                           ("--gpuperf-plot", settings.plot_dir, True),
                           ("--gpuperf-trace-dir", settings.trace_dir, True)])
        else:  # still a mistake worth naming now
            check_outputs([(f"--{option.replace('_', '-')}", path, False) for option, path in
                           (("gpuperf_json", settings.json_path), ("gpuperf_markdown", settings.markdown_path))
                           if path is not None and path.is_dir()])
        return settings


MARKER_KEYS = ("threshold", "group")


def marker_threshold(item: pytest.Item, default: float) -> float:
    """The test's @pytest.mark.gpuperf(threshold=...) or the session's threshold, as
    pytest_gpuperf_threshold leaves it; anything else in the marker (a misspelt keyword, a positional
    value) is a usage error rather than a silent default."""
    marker = item.get_closest_marker("gpuperf")
    if marker and (marker.args or set(marker.kwargs) - set(MARKER_KEYS)):
        given = [repr(a) for a in marker.args] + [f"{k}=" for k in marker.kwargs if k not in MARKER_KEYS]
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.gpuperf takes only threshold= and group=, "
                                f"got {', '.join(given)}")
    value = marker.kwargs.get("threshold") if marker else None
    threshold = default
    if value is not None:
        try:
            threshold = parse_threshold(str(value))
        except ValueError as exc:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.gpuperf(threshold=...): {exc}") from None
    hooked = item.config.hook.pytest_gpuperf_threshold(item=item, threshold=threshold)
    if hooked is None:
        return threshold
    try:
        return parse_threshold(hooked)
    except ValueError as exc:
        raise pytest.UsageError(f"{item.nodeid}: pytest_gpuperf_threshold: {exc}") from None


def marker_group(item: pytest.Item, default: str) -> str:
    """The test's @pytest.mark.gpuperf(group=...), else `default`, as pytest_gpuperf_group leaves it."""
    marker = item.get_closest_marker("gpuperf")
    group = str((marker.kwargs.get("group") if marker else None) or default)
    return str(item.config.hook.pytest_gpuperf_group(item=item, group=group) or group)
