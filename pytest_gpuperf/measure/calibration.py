"""What the timer measures or makes once per device and reuses: the L2-flush buffer, the spin rate, a
sample frame's cost, the flush's own time, the graph node gap (node_gap.py) and a stream.

One `Calibration` holds it all. `measure()` takes one; without one it uses the process's default,
which the pytest session also passes, so that direct `measure()` calls in a test (the self-checks)
share the session's flush buffer and calibrations instead of measuring them again.
"""
from __future__ import annotations

import contextlib
import gc
from typing import Any, Iterator

from . import node_gap
from .node_gap import NodeGap
from .measurement import CaptureFailure
from .replay_state import ReplayProbe

#: Cycles of the clock-raising spin ahead of the spin-rate readings, and of each reading.
_SPIN_WARM_CYCLES = 20_000_000
_SPIN_PROBE_CYCLES = 1_000_000
_SPIN_PROBES = 3


class Calibration:
    """Per-device calibrations, measured on first use (keys: CUDA device index; frames also by
    whether the L2 is flushed)."""

    def __init__(self) -> None:
        self.flush_buffers: dict[int, tuple[Any, Any]] = {}
        self.spin_rates: dict[int, float] = {}
        self.frames: dict[tuple[int, bool], tuple[float, float]] = {}  # (GPU ms, host ms) of a frame
        self.flush_ms: dict[int, float] = {}
        self.streams: dict[int, Any] = {}
        self.replay_probes: dict[int, ReplayProbe | CaptureFailure] = {}  # per device (replay_state.py)

    def stream(self, torch: Any, index: int) -> Any:
        """The timer's own stream on device `index`: a pytest session runs its tests on it, and
        measure() samples on it where its caller is on the legacy default stream (cuda_timer)."""
        if index not in self.streams:
            self.streams[index] = torch.cuda.Stream(index)
        return self.streams[index]

    @contextlib.contextmanager
    def on_stream(self, torch: Any, index: int) -> Iterator[Any]:
        """Inside, the timer's own stream on device `index` is current, ordered after the work the
        caller's stream had queued; the caller's next work is ordered after what ran inside, also
        when it raised."""
        caller = torch.cuda.current_stream()
        own = self.stream(torch, index)
        own.wait_stream(caller)
        try:
            with torch.cuda.stream(own):
                yield own
        finally:
            caller.wait_stream(own)

    def node_gap(self, index: int) -> NodeGap:
        """The gap a graph node leaves after a call (cached per process and on disk by node_gap.py)."""
        return node_gap.lookup(index)

    def l2_bytes(self, torch: Any, index: int) -> int:
        """The L2 cache size of device `index` (64 MiB where the device does not say)."""
        return getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0) or (64 << 20)

    def flush(self, torch: Any, index: int) -> "Flush":
        """The L2 flush of device `index`; its buffer is allocated once."""
        if index not in self.flush_buffers:
            l2 = self.l2_bytes(torch, index)
            buf = torch.zeros(max(2 * l2, 64 << 20) // 4, dtype=torch.float32, device=f"cuda:{index}")
            self.flush_buffers[index] = (buf, torch.empty((), dtype=torch.float32, device=f"cuda:{index}"))
        return Flush(torch, *self.flush_buffers[index])

    def spin_rate(self, torch: Any, index: int) -> float:
        """Cycles of torch.cuda._sleep per millisecond: the fastest of a few readings taken after a spin
        that raises the clock, so a spin sized with it can only last longer at a lower clock."""
        if index not in self.spin_rates:
            torch.cuda._sleep(_SPIN_WARM_CYCLES)  # loads the module and raises the clock
            rates = []
            for _ in range(_SPIN_PROBES):
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                torch.cuda._sleep(_SPIN_PROBE_CYCLES)
                end.record()
                end.synchronize()
                rates.append(_SPIN_PROBE_CYCLES / max(begin.elapsed_time(end), 1e-3))
            self.spin_rates[index] = max(rates)
        return self.spin_rates[index]


_DEFAULT = Calibration()


def default() -> Calibration:
    """The process's default Calibration."""
    return _DEFAULT


class Flush:
    """Evicts the L2 by reading a buffer twice its size (a read leaves no dirty lines to write back)."""

    def __init__(self, torch: Any, buffer: Any, sink: Any) -> None:
        self.torch = torch
        self.buffer, self.sink = buffer, sink
        self.nbytes = self.buffer.nbytes

    def __call__(self) -> None:
        self.torch.sum(self.buffer, dim=0, out=self.sink)


def low(raw_ms: list[float]) -> float:
    """The 10th percentile (the fastest of fewer than 10) of raw event times taken behind a spin: a
    host stall can only lengthen a sample, so a calibration takes a low quantile, not the median."""
    return sorted(raw_ms)[len(raw_ms) // 10]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Hold Python's garbage collector off while samples are queued (as timeit does): a collection of
    a large heap stalls the host for longer than the spin that keeps the device ahead of it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def pad_ms(host_ms: float) -> float:
    """GPU ms of a spin that covers `host_ms` of host work, with a margin (at most 50 ms)."""
    return min(host_ms * 1.5 + 0.02, 50.0)
