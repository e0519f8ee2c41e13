"""Shared set-up for the bundled perf suite.

Without a CUDA device the same tests run as CPU correctness tests: the torch impls on the CPU,
Triton under its interpreter (TRITON_INTERPRET=1, set here before any kernel module is imported)
at small sizes, and the CUDA C++ impls skipped with a reason.
"""
from __future__ import annotations

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEVICE = "cuda" if HAS_CUDA else "cpu"

# Largest problem (in elements of the biggest operand) a CPU correctness run takes on; the
# Triton interpreter runs a block at a time in numpy, so it is kept smaller still.
CPU_MAX_NUMEL = 1 << 20
INTERPRETER_MAX_NUMEL = 1 << 16


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Self-checks of the harness (selfcheck marker) take minutes: they run only when `-m` asks for them."""
    if "selfcheck" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="harness self-check: select with -m selfcheck")
    for item in items:
        if item.get_closest_marker("selfcheck"):
            item.add_marker(skip)


@pytest.fixture
def device() -> str:
    return DEVICE


def require(impl: str, numel: int) -> None:
    """Skip, with a reason, a case this machine cannot run (CUDA C++ or a large size on CPU)."""
    if HAS_CUDA:
        return
    if impl.startswith("cuda"):
        pytest.skip("CUDA C++ impl needs a CUDA device")
    limit = INTERPRETER_MAX_NUMEL if impl.startswith("triton") else CPU_MAX_NUMEL
    if numel > limit:
        pytest.skip(f"{numel} elements is a GPU-only size (CPU correctness runs stop at {limit})")
