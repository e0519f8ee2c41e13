"""Hooks another repository implements in its conftest.py (or a plugin) to adapt gpuperf without
forking it, as pytest-benchmark's `pytest_benchmark_*` hooks do. docs/hooks.md has an example of each."""
from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_gpuperf_threshold(item: pytest.Item, threshold: float) -> float | str | None:
    """The slowdown that fails `item`, given the one its marker or the session set (a fraction:
    0.05 is 5%). Return another (a fraction, or text such as "10%"), or None to keep it."""


@pytest.hookspec(firstresult=True)
def pytest_gpuperf_group(item: pytest.Item, group: str) -> str | None:
    """The report group `item`'s result is shown and plotted in, given its marker's or its test
    function's name. Return another, or None to keep it."""


@pytest.hookspec
def pytest_gpuperf_run_info(config: pytest.Config, info: dict[str, Any]) -> None:
    """Add what describes this run (a commit, a CI job, a container image) to `info`, the run's
    software versions: it is stored as the baseline's `software`, the results JSON's
    `machine_info.gpuperf_software` and the Markdown summary's header. Values must be plain (str,
    number, bool, None, lists and mappings of them)."""


@pytest.hookspec
def pytest_gpuperf_results(config: pytest.Config, results: list[dict[str, Any]], device: dict[str, Any],
                           software: dict[str, Any]) -> None:
    """The run's results, once its outputs are written (on pytest-xdist's controller only): one
    record per measured test (the keys of `gpu_benchmark.stats`, plus nodeid, name, param, group,
    threshold and, where judged, verdict and change), the device and the software with its run
    info; to upload them, say. Reading them changes nothing gpuperf writes."""
