"""pytester runs pytest in-process and restores sys.modules after each run; torch's and Triton's C
extensions cannot be imported a second time (Triton's `triton._C.libtriton.*` submodules are made by
the extension, not found on disk), so import them once here, before any inner run does."""
import contextlib

import pytest

from sim_cuda import VirtualClock, use_virtual_clock

with contextlib.suppress(ImportError):
    import torch  # noqa: F401
with contextlib.suppress(ImportError):
    import triton  # noqa: F401


@pytest.fixture
def virtual_clock(monkeypatch) -> VirtualClock:
    """The timer's clock, simulated (tests/sim_cuda.py): durations a test asserts are simulated
    time, the same on an idle or a busy machine."""
    return use_virtual_clock(monkeypatch)
