"""What `-n auto` (pyproject.toml's addopts) means in this repository: on a machine without a GPU
the correctness run spreads over the CPU's cores (a pytest-xdist worker per core, at most
MAX_CPU_WORKERS); on a GPU host and under --gpuperf it stays one process, as without xdist, since
a timing and a GPU are not to be shared (docs/kernels/README.md). An explicit `-n N` (one worker
per GPU under --gpuperf, say) or PYTEST_XDIST_AUTO_NUM_WORKERS is used as given."""
from __future__ import annotations

import os

import pytest

#: Workers on a CPU-only machine at most: each imports torch and Triton (~0.5 GB).
MAX_CPU_WORKERS = 8


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own reading of it
    if config.getoption("gpuperf", False):
        return 0
    import torch

    if torch.cuda.device_count():
        return 0
    cores = min(len(os.sched_getaffinity(0)), MAX_CPU_WORKERS)
    return cores if cores > 1 else 0
