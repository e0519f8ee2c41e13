"""Device check: where in a measurement does a power-capped matmul run at boost clock?

`PYTHONPATH=. python docs/ab-check/power_phase_probe.py`: the precision self-check's bf16 matmul
4096 (3 s of settling load, then 10 measurements of 1 s), with NVML read every 5 ms in a thread.
Prints per run when its warm-up, calibration and sampling ran, each batch's median and the SM clock
the timer read after it, and the trace's clock and power-cap flag through the sampling, so that a run at boost can be placed.
"""
import statistics
import threading
import time

import torch

from pytest_gpuperf.measure import cuda_timer
from pytest_gpuperf.measure.device import POWER_CAP, read_clocks
from pytest_gpuperf.measure.timer import TimingConfig, measure

N, RUNS, SETTLE_S, EVERY_S = 4096, 10, 3.0, 0.005
INDEX = torch.cuda.current_device()
trace: list[tuple[float, int, bool]] = []
phases: list[tuple[str, float]] = []
done = threading.Event()


def watch() -> None:
    while not done.is_set():
        s = read_clocks(INDEX)
        trace.append((time.perf_counter(), s.sm_clock_mhz or 0, POWER_CAP in s.throttle))
        time.sleep(EVERY_S)


def timed(name, method):
    def wrapper(self, *args, **kwargs):
        phases.append((name + " start", time.perf_counter()))
        try:
            return method(self, *args, **kwargs)
        finally:
            phases.append((name + " end", time.perf_counter()))
    return wrapper


timers = []
init = cuda_timer.CudaTimer.__init__


def keep(self, *args, **kwargs):
    init(self, *args, **kwargs)
    timers.append(self)


cuda_timer.CudaTimer.__init__ = keep
cuda_timer.CudaTimer._warmup = timed("warmup", cuda_timer.CudaTimer._warmup)
cuda_timer.CudaTimer._sample = timed("sample", cuda_timer.CudaTimer._sample)

a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
fn = lambda: a @ b  # noqa: E731
threading.Thread(target=watch, daemon=True).start()
t0 = time.perf_counter()
deadline = t0 + SETTLE_S
while time.perf_counter() < deadline:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
for i in range(RUNS):
    phases.clear()
    start = time.perf_counter()
    m = measure(fn, TimingConfig(budget_s=1.0))
    end = time.perf_counter()
    p = dict(phases)
    ws, we, ss, se = (p[k] - t0 for k in ("warmup start", "warmup end", "sample start", "sample end"))
    print(f"run {i + 1:2} median {m.median_ms * 1e3:7.2f} us clock {m.sm_clock_mhz} | warm-up {ws:6.2f}-{we:6.2f} "
          f"sampling {ss:6.2f}-{se:6.2f} end {end - t0:6.2f} s | throttle {m.throttle} loaded {m.loaded}")
    clocks = timers[-1].clocks
    print("   batches (us @ MHz after): " + ", ".join(
        f"{bm * 1e3:.1f}@{c}" for bm, c in zip(m.batch_medians, clocks[len(clocks) - len(m.batch_medians):])))
    inside = [(t - t0, c, cap) for t, c, cap in trace if ss + t0 - 0.3 <= t <= se + t0]
    print("   trace from 0.3 s before sampling (s: MHz cap), every 50 ms: " + ", ".join(
        f"{t:.2f}: {c} {'C' if cap else '-'}" for t, c, cap in inside[::10]))
    m.value = None
done.set()
