"""The repository's `-n auto` (pyproject.toml's addopts, conftest.py): a worker per core on a
machine without a GPU, one process on a GPU host and under --gpuperf, and pytest-xdist's own count
where PYTEST_XDIST_AUTO_NUM_WORKERS says."""
from __future__ import annotations

import importlib.util
import os
import tomllib
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _hook():
    spec = importlib.util.spec_from_file_location("repo_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Config:
    def __init__(self, gpuperf: bool):
        self.gpuperf = gpuperf

    def getoption(self, name, default=None):
        return self.gpuperf if name == "gpuperf" else default


@pytest.fixture
def machine(monkeypatch):
    """Sets the machine the hook sees: (GPUs, cores)."""
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)

    def set_machine(gpus: int, cores: int):
        monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    return set_machine


@pytest.mark.parametrize("gpus,cores,gpuperf,workers", [
    (0, 2, False, 2),  # the README's test command on a two-core CI machine
    (0, 64, False, 8),  # at most MAX_CPU_WORKERS
    (0, 1, False, 0),  # one core: no worker process
    (1, 16, False, 0),  # a GPU host: one process, as without xdist
    (0, 2, True, 0),  # timing on the host: cores are not shared
    (1, 16, True, 0),
    (2, 16, True, 0),  # several GPUs: -n N where wanted
])
def test_auto_counts_workers_by_machine(machine, gpus, cores, gpuperf, workers):
    machine(gpus, cores)
    hook = _hook()
    assert hook.pytest_xdist_auto_num_workers(_Config(gpuperf)) == workers


def test_the_environment_variable_is_left_to_xdist(machine, monkeypatch):
    machine(0, 2)
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert _hook().pytest_xdist_auto_num_workers(_Config(False)) is None


def test_the_repository_runs_with_n_auto():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert options["addopts"].split() == ["-n", "auto"]
