"""Device check: where in a measurement does a power-capped matmul run at boost clock?

`PYTHONPATH=. python docs/ab-check/power_phase_probe.py`: the precision self-check's bf16 matmul
4096 (3 s of settling load, then 10 measurements of 1 s), with NVML read every 5 ms in a thread.
Prints per run when its warm-up, calibration and sampling ran, each batch's median and the SM clock
the timer read after it, and the trace's clock and power-cap flag through the sampling, so that a run at boost can be placed.
With FILL_FIRST_MS set, the timer's first fill (device time queued after each batch) is that many ms.
"""
import os
import statistics
import threading
import time

import torch

from pytest_gpuperf.measure import cuda_timer
from pytest_gpuperf.measure.device import POWER_CAP, read_clocks
from pytest_gpuperf.measure.timer import TimingConfig, measure

N, RUNS, SETTLE_S, EVERY_S = 4096, int(os.environ.get("RUNS", 10)), 3.0, 0.005
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
if "FILL_FIRST_MS" in os.environ:
    cuda_timer.FILL_FIRST_MS = float(os.environ["FILL_FIRST_MS"])
batches: list[tuple[int, int]] = []  # (samples, untimed calls after them) of each batch
batch = cuda_timer.CudaTimer._batch


def count(self, body, n, *args, fill=0, **kwargs):
    batches.append((n, fill))
    return batch(self, body, n, *args, fill=fill, **kwargs)


cuda_timer.CudaTimer._batch = count
made: list = []  # every event the timer makes, in order (a batch's are begin, end, begin, end, ...)
event = cuda_timer.CudaTimer._event


def keep_event(self):
    made.append(event(self))
    return made[-1]


cuda_timer.CudaTimer._event = keep_event
pads: list[float] = []  # host ms each spin the timer queued covers
pad = cuda_timer.CudaTimer._pad


def count_pad(self, host_ms):
    pads.append(host_ms)
    return pad(self, host_ms)


cuda_timer.CudaTimer._pad = count_pad


def device_gaps(sampled, per_call_ms):
    """(GPU ms between batches less their untimed calls, GPU ms inside batches not in a sample), from
    the events of the sampled batches."""
    tail = made[-2 * sum(n for n, _ in sampled):]
    pairs = list(zip(tail[0::2], tail[1::2]))
    between, inside, i = [], 0.0, 0
    for k, (n, fill) in enumerate(sampled):
        own = pairs[i:i + n]
        inside += own[0][0].elapsed_time(own[-1][1]) - sum(b.elapsed_time(e) for b, e in own)
        if k + 1 < len(sampled):
            between.append(own[-1][1].elapsed_time(pairs[i + n][0]) - fill * per_call_ms)
        i += n
    return between, inside
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
    batches.clear()
    made.clear()
    pads.clear()
    start = time.perf_counter()
    m = measure(fn, TimingConfig(budget_s=1.0))
    end = time.perf_counter()
    p = dict(phases)
    ws, we, ss, se = (p[k] - t0 for k in ("warmup start", "warmup end", "sample start", "sample end"))
    print(f"run {i + 1:2} median {m.median_ms * 1e3:7.2f} us clock {m.sm_clock_mhz} | warm-up {ws:6.2f}-{we:6.2f} "
          f"sampling {ss:6.2f}-{se:6.2f} end {end - t0:6.2f} s | throttle {m.throttle} loaded {m.loaded}")
    sampled = batches[-len(m.batch_medians) - m.loaded:]  # and a loaded call's settling batch
    busy = sum(n + fill for n, fill in sampled) * m.median_ms / 1e3
    print(f"   sampling: {len(sampled)} batches, {sum(n for n, _ in sampled)} samples and "
          f"{sum(f for _, f in sampled)} untimed calls, device busy ~{busy / (se - ss):.0%} of {se - ss:.2f} s")
    between, inside = device_gaps(sampled, m.median_ms)
    print(f"   device between batches, less their untimed calls: median {statistics.median(between):.2f} ms, "
          f"total {sum(between):.1f} ms; inside batches outside samples {inside:.1f} ms; {len(pads)} spins "
          f"covering median {statistics.median(pads) if pads else 0:.3f} ms of host time")
    clocks = timers[-1].clocks
    print("   batches (us @ MHz after): " + ", ".join(
        f"{bm * 1e3:.1f}@{c}" for bm, c in zip(m.batch_medians, clocks[len(clocks) - len(m.batch_medians):])))
    inside = [(t - t0, c, cap) for t, c, cap in trace if ss + t0 - 0.3 <= t <= se + t0]
    print("   trace from 0.3 s before sampling (s: MHz cap), every 50 ms: " + ", ".join(
        f"{t:.2f}: {c} {'C' if cap else '-'}" for t, c, cap in inside[::10]))
    m.value = None
done.set()
