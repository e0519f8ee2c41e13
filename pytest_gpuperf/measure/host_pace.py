"""Keeping the device ahead of the host: how much host time a spin ahead of every sample must cover,
and growing it when the host slows down after calibration (docs/measurement.md, step 4)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from .calibration import pad_ms

#: A call whose host enqueue time exceeds this share of a sample's GPU time cannot keep the GPU busy.
LAUNCH_BOUND_RATIO = 0.5
#: A batch whose host took longer to queue a sample than the device took to run one (the call, the
#: flush and the spin ahead of it), by more than this share of the latter, let the device idle inside
#: samples, which then timed the host: it is dropped and the spins grow. A call that waits for the
#: device inside (a sync) queues exactly as fast as the device runs, and is left as it is.
IDLE_SHARE = 0.02
#: ... and by more than this (ms), below which the head spin of a batch absorbs it.
MIN_IDLE_MS = 0.002
#: The spins grow at most this many times in one measurement; then it keeps what it has, with a warning.
MAX_PAD_RAISES = 4


def spin_each_ms(host_ms: float, gpu_ms: float, flush_ms: float) -> float:
    """Host time a spin ahead of every sample must cover, where queuing a sample (`host_ms`) takes the
    host over half the device's time for it (the call's `gpu_ms` and the flush): 0 elsewhere."""
    if host_ms <= LAUNCH_BOUND_RATIO * (gpu_ms + flush_ms):
        return 0.0
    return max(host_ms - gpu_ms - flush_ms, 0.0) + 0.001


def spin_gpu_ms(each_ms: float) -> float:
    """GPU time of the spin that covers `each_ms` of host time (none for 0)."""
    return pad_ms(each_ms) if each_ms > 0 else 0.0


def queued_ms(stamps: list[float]) -> float | None:
    """Host ms to queue one sample: the median gap between the host clock's stamps taken as samples
    start to be queued (a stall lengthens one gap), None with fewer than three."""
    if len(stamps) < 3:
        return None
    return statistics.median(b - a for a, b in zip(stamps, stamps[1:])) * 1e3


@dataclass
class HostPace:
    """The spin ahead of every sample of one measurement (`each_ms`: host ms it covers), grown while
    the host falls behind the device. `gpu_ms` and `flush_ms` are the device's time per sample."""

    each_ms: float
    gpu_ms: float
    flush_ms: float
    adapt: bool = True
    raises: int = 0
    warnings: list[str] = field(default_factory=list)

    def keep(self, stamps: list[float]) -> bool:
        """Judge a batch from its queuing stamps: False when the host fell behind the device (drop
        the batch: the spins have grown for the next one)."""
        queued = queued_ms(stamps) if self.adapt else None
        if queued is None:
            return True
        device_ms = self.gpu_ms + self.flush_ms + spin_gpu_ms(self.each_ms)
        if queued - device_ms <= max(MIN_IDLE_MS, IDLE_SHARE * device_ms):
            return True
        if self.raises == MAX_PAD_RAISES:
            self.adapt = False
            self.warnings.append(f"the host took {queued:.3f} ms to queue a sample, longer than the device ran "
                                 f"one, after the spins ahead of samples had grown {MAX_PAD_RAISES} times: samples "
                                 "may include host time")
            return True
        self.each_ms, self.raises = queued - self.gpu_ms - self.flush_ms + 0.001, self.raises + 1
        return False
