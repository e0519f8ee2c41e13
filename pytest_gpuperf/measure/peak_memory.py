"""One call's peak memory on a CUDA device: the most bytes it asked torch's caching allocator for at
once beyond those held before it (docs/measurement.md, step 9)."""
from __future__ import annotations

from typing import Any, Callable

from .calibration import gc_paused

#: torch.cuda.memory_stats keys of the bytes code asked the caching allocator for, now and at peak.
REQUESTED_NOW, REQUESTED_PEAK = "requested_bytes.all.current", "requested_bytes.all.peak"


def allocator_bytes(torch: Any) -> tuple[int, int]:
    """(now, peak since the last reset) bytes that code asked the caching allocator for. The bytes it
    handed out include its rounding, which depends on what it holds cached (3 MB of a 220 MB attention
    backward on an H100), so one call's peak would differ between processes; torch without request
    counts gives those."""
    stats = torch.cuda.memory_stats() if hasattr(torch.cuda, "memory_stats") else {}
    if REQUESTED_NOW in stats and REQUESTED_PEAK in stats:
        return stats[REQUESTED_NOW], stats[REQUESTED_PEAK]
    return torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated()


def call_peak(torch: Any, fn: Callable[[], Any]) -> tuple[Any, int]:
    """fn()'s result and the bytes it asked for at its peak beyond those held before it (the garbage
    collector held off, so earlier garbage freed meanwhile cannot lower the peak)."""
    with gc_paused():
        torch.cuda.synchronize()
        before, _ = allocator_bytes(torch)
        torch.cuda.reset_peak_memory_stats()
        value = fn()
        torch.cuda.synchronize()
    return value, allocator_bytes(torch)[1] - before
