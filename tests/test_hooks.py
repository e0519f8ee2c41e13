"""The pytest_gpuperf_* hooks (docs/hooks.md), implemented in a suite's conftest.py as another
repository would."""
from __future__ import annotations

import json

import pytest
import yaml

pytest_plugins = ["pytester"]

FAST = ("--gpuperf-budget", "0.05", "-p", "no:randomly")

CONFTEST = """
import json

def pytest_gpuperf_threshold(item, threshold):
    if "slow_path" in item.nodeid:
        return "50%"

def pytest_gpuperf_group(item, group):
    return "sums" if item.name.startswith("test_sum") else None

def pytest_gpuperf_run_info(config, info):
    info["ci_job"] = "1234"

def pytest_gpuperf_results(config, results, device, software):
    with open("uploaded.json", "w") as out:
        json.dump({"device": device["key"], "job": software["ci_job"],
                   "tests": {r["nodeid"]: [r["group"], r["threshold"], r["median_ms"] > 0] for r in results}}, out)
"""

TESTS = """
import pytest

def test_sum_slow_path(gpu_benchmark):
    gpu_benchmark(sum, range(100))

@pytest.mark.gpuperf(threshold="10%", group="mine")
def test_other(gpu_benchmark):
    gpu_benchmark(abs, -1)
"""


def test_hooks_in_a_conftest_set_thresholds_groups_run_info_and_receive_the_results(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_hooked=TESTS)
    result = pytester.runpytest("--gpuperf", "--gpuperf-save", "--gpuperf-json=r.json", "--gpuperf-markdown=r.md",
                                *FAST)
    result.assert_outcomes(passed=2)
    uploaded = json.loads((pytester.path / "uploaded.json").read_text())
    assert uploaded["job"] == "1234" and uploaded["device"].startswith("cpu-")
    assert uploaded["tests"] == {"test_hooked.py::test_sum_slow_path": ["sums", 0.5, True],
                                 "test_hooked.py::test_other": ["mine", 0.1, True]}
    doc = json.loads((pytester.path / "r.json").read_text())
    assert doc["machine_info"]["gpuperf_software"]["ci_job"] == "1234"
    assert {b["group"] for b in doc["benchmarks"]} == {"sums", "mine"}
    assert "1234" in (pytester.path / "r.md").read_text()
    (stored,) = (pytester.path / "baselines").glob("*.yaml")
    assert yaml.safe_load(stored.read_text())["software"]["ci_job"] == "1234"


def test_a_threshold_hook_that_returns_no_threshold_is_a_usage_error_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("def pytest_gpuperf_threshold(item, threshold):\n    return 'fast'\n")
    pytester.makepyfile(test_hooked=TESTS)
    result = pytester.runpytest("--gpuperf", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_sum_slow_path: pytest_gpuperf_threshold: threshold 'fast' is not a number*"])


def test_the_hooks_need_no_gpuperf_to_be_declared(pytester: pytest.Pytester) -> None:
    """A conftest that implements them still runs plain pytest (pytest refuses unknown pytest_* hooks)."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_hooked=TESTS)
    pytester.runpytest(*FAST[2:]).assert_outcomes(passed=2)
    assert not (pytester.path / "uploaded.json").exists()
