"""Device check: what does a power-capped matmul cost in an unbroken loop, against the harness's median?

`PYTHONPATH=. python docs/ab-check/power_loop_probe.py`: the bf16 matmul 4096 queued back to back
(events around every CHUNK calls, the host never more than three chunks ahead, the device never
idle) for LOOP_S, then the harness's measurement three times, then the loop again, then the loop
with a fixed idle after every chunk (IDLE_US). Prints per half second of each loop the median time
per call and the SM clock, so the loop's steady state can be set beside the harness's median.
"""
import statistics
import time

import torch

from pytest_gpuperf.measure.device import read_clocks
from pytest_gpuperf.measure.timer import TimingConfig, measure

N, CHUNK, LOOP_S, WINDOW_S = 4096, 20, 4.0, 0.5
INDEX = torch.cuda.current_device()
a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
fn = lambda: a @ b  # noqa: E731


def loop(label: str, idle_us: float = 0.0) -> None:
    marks, clocks = [], []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < LOOP_S:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(CHUNK):
            fn()
        end.record()
        marks.append((time.perf_counter() - t0, start, end))
        if len(marks) > 3:
            marks[-4][2].synchronize()
            if idle_us:  # drain the queue, then leave the device idle
                torch.cuda.synchronize()
                t = time.perf_counter()
                while time.perf_counter() - t < idle_us * 1e-6:
                    pass
        clocks.append((time.perf_counter() - t0, read_clocks(INDEX).sm_clock_mhz or 0))
    torch.cuda.synchronize()
    windows: dict[int, list[float]] = {}
    for t, s, e in marks:
        windows.setdefault(int(t / WINDOW_S), []).append(s.elapsed_time(e) / CHUNK * 1e3)
    out = []
    for w, times in sorted(windows.items()):
        mhz = [c for t, c in clocks if int(t / WINDOW_S) == w]
        out.append(f"{statistics.median(times):.1f}@{statistics.median(mhz):.0f}")
    print(f"{label}: per {WINDOW_S} s (us per call @ MHz): {', '.join(out)}", flush=True)


fn()
loop("loop after idle")
loop("loop")
for _ in range(3):
    m = measure(fn, TimingConfig(budget_s=1.0))
    print(f"harness: median {m.median_ms * 1e3:.2f} us clock {m.sm_clock_mhz} MHz", flush=True)
    m.value = None
loop("loop after the harness")
loop("loop with 100 us idle after each chunk", idle_us=100)
loop("loop with 400 us idle after each chunk", idle_us=400)
