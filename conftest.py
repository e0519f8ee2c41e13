"""What `-n auto` (pyproject.toml's addopts) means in this repository: on a machine without a GPU
the correctness run spreads over the CPU's cores (a pytest-xdist worker per core, at most
MAX_CPU_WORKERS); on a GPU host it stays one process, and under --gpuperf one process or one
worker per GPU, since a timing and a GPU are not to be shared (docs/kernels/README.md). An
explicit `-n N` or PYTEST_XDIST_AUTO_NUM_WORKERS is used as given."""
from __future__ import annotations

import os

import pytest

#: Workers on a CPU-only machine at most: each imports torch and Triton (~0.5 GB).
MAX_CPU_WORKERS = 8


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own reading of it
    import torch

    gpus = torch.cuda.device_count()
    if config.getoption("gpuperf", False):
        return gpus if gpus > 1 else 0
    if gpus:
        return 0
    cores = min(len(os.sched_getaffinity(0)), MAX_CPU_WORKERS)
    return cores if cores > 1 else 0
