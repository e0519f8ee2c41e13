"""Time one callable: `measure(fn, config, inputs=..., prefer=...)` picks the CUDA timer when the work
is on a CUDA device and a host clock otherwise."""
from __future__ import annotations

import math
import statistics
import sys
import time
from typing import Any, Callable

from ..core.records import Method, Phase
from .calibration import Calibration
from .cuda_timer import CudaTimer
from .measurement import Measurement, TimingConfig, on_cuda, should_stop

__all__ = ["CPU_SAMPLE_S", "Measurement", "TimingConfig", "cuda_sync_timer", "measure"]

# Host wall time a CPU sample aims for, so perf_counter's resolution is irrelevant.
CPU_SAMPLE_S = 1e-4


def measure(fn: Callable[[], Any], config: TimingConfig | None = None, *, inputs: Any = (),
            prefer: str | None = None, loaded: bool = False, baseline_clock_mhz: int | None = None,
            calibration: Calibration | None = None) -> Measurement:
    """Time `fn()`; CUDA timing when `inputs` or fn's result live on a CUDA device, a host clock otherwise.

    `prefer` names the method a baseline was measured with ('events' or 'graph'): the automatic
    choice flips on calls near its boundaries (20 µs, 0.1 ms for calls sampled back to back, the
    host's launch time), and the two methods see different cache states, so a comparison should
    time both sides the same way. `loaded`: the baseline was sampled under the power cap in an unbroken
    loop, so this measurement is too, whatever the clock at its warm-up's end (the cap engages up to a
    second into a load); `baseline_clock_mhz`, the SM clock its samples ran at, ends that longer warm-up
    once this call's clock runs there too. `calibration`: the per-device calibrations
    to use and fill (default: the process's, calibration.default())."""
    config = config or TimingConfig()
    start = time.perf_counter()
    value = fn()  # compile / autotune / load; also tells where the work runs
    first_call_s = time.perf_counter() - start
    torch = sys.modules.get("torch")
    cuda_in_use = torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized()
    if on_cuda(inputs) or on_cuda(value):
        # The timer's own calls return the value; holding the first one through the measurement
        # would keep a second copy of every output on the device meanwhile.
        del value
        m = CudaTimer(fn, config, inputs, prefer, calibration=calibration, loaded=loaded,
                      baseline_clock_mhz=baseline_clock_mhz).run()
    else:
        # No CUDA tensor in sight, yet the callable may launch work (a kernel writing into a buffer it
        # closes over): a host clock then only sees launches unless each sample waits for the device.
        m = _measure_cpu(fn, config, value, sync=torch.cuda.synchronize if cuda_in_use else None)
    m.wall_s = time.perf_counter() - start
    m.first_call_s = first_call_s
    return m


def _measure_cpu(fn: Callable[[], Any], config: TimingConfig, value: Any,
                 sync: Callable[[], None] | None) -> Measurement:
    deadline = time.perf_counter() + config.warmup_s
    t0 = time.perf_counter()
    calls = 0
    while calls < 3 or time.perf_counter() < deadline:
        fn()
        calls += 1
    warm_s = time.perf_counter() - t0
    per_call = warm_s / calls
    inner = max(1, math.ceil(CPU_SAMPLE_S / max(per_call, 1e-9)))
    per_batch = max(1, math.ceil(config.batch_s / (per_call * inner)))
    samples: list[float] = []
    batch_medians: list[float] = []
    started = time.perf_counter()
    while not should_stop(samples, batch_medians, config, started):
        batch = []
        for _ in range(per_batch):
            t = time.perf_counter()
            for _ in range(inner):
                fn()
            if sync is not None:
                sync()
            batch.append((time.perf_counter() - t) * 1e3 / inner)
        samples.extend(batch)
        batch_medians.append(statistics.median(batch))
    method = Method.CPU if sync is None else Method.HOST_SYNC
    phases = {Phase.WARMUP.value: warm_s, Phase.SAMPLES.value: time.perf_counter() - started}
    return Measurement(samples, method.value, inner, "n/a", batch_medians, value=value, phases=phases)


def cuda_sync_timer() -> float:
    """A host clock that first waits for the current CUDA device (pytest-benchmark's timer under --gpuperf)."""
    import torch

    torch.cuda.synchronize()
    return time.perf_counter()
