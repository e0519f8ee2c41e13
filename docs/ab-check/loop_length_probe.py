"""Device check: does a call's time per call depend on how many calls run back to back, and on CUPTI?

`python docs/ab-check/loop_length_probe.py`: for GeLU of 256M elements (bf16, and fp32 as control),
prints the events-timed time per call of loops of 1, 5, 20 and 200 calls back to back (median over
repeats, no profiler yet), the harness's median, then CUPTI's durations of 200 profiled calls in three
segments of the loop (first, middle and last 20) with events around that loop, and the 200-call loop
again after profiling. Answers whether the steady-state self-check's 200-call profiled loop is slower
than short batches because of the loop's length or because CUPTI is watching.
"""
import statistics
import time

import torch
import torch.nn.functional as F

from pytest_gpuperf.measure.device import read_clocks
from pytest_gpuperf.measure.profile import calls_of, op_names, profiled_ops
from pytest_gpuperf.measure.timer import TimingConfig, measure

NUMEL = 1 << 28
LOOPS = {1: 30, 5: 20, 20: 10, 200: 5}  # calls back to back: repeats


def per_call_us(fn, calls: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def warm(fn, seconds: float = 0.5) -> None:
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()


cases = {}
for name, dtype in (("gelu bf16", torch.bfloat16), ("gelu fp32", torch.float32)):
    x = torch.randn(NUMEL, device="cuda", dtype=dtype)
    cases[name] = (lambda x=x: F.gelu(x), x)

names = {}
for name, (fn, x) in cases.items():
    warm(fn)
    loops = {calls: per_call_us(fn, calls, reps) for calls, reps in LOOPS.items()}
    m = measure(fn, TimingConfig(), inputs=x)
    m.value = None
    clock = read_clocks(torch.cuda.current_device()).sm_clock_mhz
    print(f"{name}: events per call " + "  ".join(f"{c} calls {us:8.2f} us" for c, us in loops.items())
          + f"  harness {m.median_ms * 1e3:8.2f} us ({m.method}, {len(m.samples_ms)} samples x {m.calls_per_sample} calls)  SM {clock} MHz", flush=True)

for name, (fn, x) in cases.items():
    names[name] = op_names(fn)
    warm(fn)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def loop(fn=fn, start=start, end=end) -> None:
        start.record()
        for _ in range(200):
            fn()
        end.record()

    found = calls_of(profiled_ops(loop), names[name])
    durations = [sum(e.device_time_total for e in call) for call in found]
    starts = [call[0].time_range.start for call in found]
    steps = [b - a for a, b in zip(starts, starts[1:])]
    seg = {k: statistics.median(durations[s]) for k, s in
           (("first", slice(0, 20)), ("middle", slice(90, 110)), ("last", slice(180, 200)))}
    after = per_call_us(fn, 200, 5)
    print(f"{name}: CUPTI ({len(found)} calls) median {statistics.median(durations):8.2f} us, step "
          f"{statistics.median(steps):8.2f} us; " + "  ".join(f"{k} {v:8.2f}" for k, v in seg.items())
          + f"; events around the profiled loop {start.elapsed_time(end) * 1e3 / 200:8.2f} us per call"
          + f"; 200 calls after profiling {after:8.2f} us", flush=True)
