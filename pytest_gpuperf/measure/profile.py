"""What one call of a function launches on the GPU, read from torch.profiler.

Lets a test assert structure that timing can't show: "one kernel launch" (fusion worked), "no cast
kernels", "uses a cuBLAS/cutlass kernel". The callable is called once to warm up (compile, autotune),
then once under the profiler.
"""
from __future__ import annotations

import contextlib
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

#: A call timed with events and at least this long (ms) may be measured in a process CUPTI is
#: attached to: the profiler's cost is on the host (it doubles each launch's), which such a call
#: keeps off the device's timeline. Shorter calls and graphs must be measured before profiling.
UNAFFECTED_FROM_MS = 0.1
#: torch.profiler's warning (torch 2.11) that a profile keeps only its last cycle's events: each
#: profile here has one cycle.
ONE_CYCLE_WARNING = "Warning: Profiler clears events at the end of each cycle"


@contextlib.contextmanager
def _profiling(*activities):
    """torch.profiler.profile of `activities`, one cycle, without its warning about cycles."""
    from torch.profiler import profile

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=ONE_CYCLE_WARNING)
        with profile(activities=list(activities)) as prof:
            yield prof


@dataclass(frozen=True)
class KernelStat:
    """One device operation (kernel, memcpy or memset) by name: how often it ran and its total device time."""

    name: str
    calls: int
    cuda_time_us: float

    @property
    def is_kernel(self) -> bool:
        """False for the copy engine's memcpys and the driver's memsets (cuBLAS zeroes workspaces so)."""
        return not self.name.startswith(("Memcpy", "Memset"))


class Profile:
    """Device operations of one call: `.kernels`, `.launches`, `.cuda_time_us`, plus search and export."""

    def __init__(self, profiler: Any, kernels: list[KernelStat]) -> None:
        self._profiler = profiler
        self.kernels = kernels

    @property
    def launches(self) -> int:
        """Kernels launched by the call (memcpys and memsets are not kernels: see `.memops`)."""
        return sum(k.calls for k in self.kernels if k.is_kernel)

    @property
    def memops(self) -> int:
        """Memcpys and memsets issued by the call."""
        return sum(k.calls for k in self.kernels if not k.is_kernel)

    @property
    def cuda_time_us(self) -> float:
        return sum(k.cuda_time_us for k in self.kernels)

    def find(self, pattern: str) -> list[KernelStat]:
        """Kernels whose name matches the regular expression `pattern` (re.search, case-insensitive)."""
        rx = re.compile(pattern, re.IGNORECASE)
        return [k for k in self.kernels if rx.search(k.name)]

    def export_chrome_trace(self, path: str | Path) -> Path:
        """Write the trace for chrome://tracing or Perfetto; returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._profiler.export_chrome_trace(str(path))
        return path

    def table(self) -> str:
        """The kernels as text, longest first (used in assertion messages)."""
        rows = sorted(self.kernels, key=lambda k: -k.cuda_time_us)
        lines = [f"{k.calls:>4} x {k.cuda_time_us:>10.1f} us  {k.name[:110]}" for k in rows]
        head = f"{self.launches} kernel launches, {self.memops} memcpy/memset, {self.cuda_time_us:.1f} us on the device:"
        return "\n".join([head, *lines])

    def __repr__(self) -> str:
        return f"Profile(launches={self.launches}, cuda_time_us={self.cuda_time_us:.1f}, kernels={len(self.kernels)})"


def _device_time_us(event: Any) -> float:
    total = getattr(event, "device_time_total", None)  # named cuda_time_total before torch 2.4
    return float(event.cuda_time_total if total is None else total)


def device_events(prof: Any) -> list:
    """The device's operations (kernels, memcpys, memsets) in a finished torch.profiler session, in
    the order they started."""
    from torch.autograd import DeviceType

    return sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)


def profiled_ops(run: Callable[[], Any], times: int = 1) -> list:
    """The device operations of `times` calls of `run` under torch.profiler (CUDA activity only), in
    the order they started."""
    import torch
    from torch.profiler import ProfilerActivity

    with _profiling(ProfilerActivity.CUDA) as prof:
        for _ in range(times):
            run()
        torch.cuda.synchronize()
    return device_events(prof)


def op_names(fn: Callable[[], Any]) -> list[str]:
    """The names of the device operations one call of `fn` runs, in the order they start."""
    return [e.name for e in profiled_ops(fn)]


def calls_of(ops: list, names: list[str]) -> list[list]:
    """The calls among `ops` (device_events of a session) of a function whose ops are `names`: each
    run of those ops in order; ops between the runs (an L2 flush, another function's) are skipped."""
    calls, i = [], 0
    while i + len(names) <= len(ops):
        if [e.name for e in ops[i:i + len(names)]] == names:
            calls.append(ops[i:i + len(names)])
            i += len(names)
        else:
            i += 1
    return calls


def capture(fn: Callable[[], Any]) -> Profile:
    """Profile one warm call of `fn` on the current CUDA device."""
    import torch
    from torch.profiler import ProfilerActivity

    fn()
    torch.cuda.synchronize()
    with _profiling(ProfilerActivity.CPU, ProfilerActivity.CUDA) as prof:
        fn()
        torch.cuda.synchronize()
    calls: dict[str, int] = {}
    times: dict[str, float] = {}
    for event in device_events(prof):
        calls[event.name] = calls.get(event.name, 0) + 1
        times[event.name] = times.get(event.name, 0.0) + _device_time_us(event)
    kernels = [KernelStat(name, calls[name], times[name]) for name in calls]
    return Profile(prof, kernels)
