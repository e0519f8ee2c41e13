"""Device check: when does a power-capped GPU run a repeated matmul measurement at boost clock?

`PYTHONPATH=. python docs/ab-check/power_cap_probe.py`: the precision self-check's bf16 matmul 4096
(3 s of load, then 10 measurements of 1 s), with NVML's SM clock, power draw and throttle reasons
read every 10 ms in a thread. Prints each measurement's median and clock, then the clock's changes
over time (boost at 1900 MHz or more, capped below) with each measurement's start and end, so that
boost spells can be matched with what the harness or the host was doing.
"""
import statistics
import threading
import time

import pynvml
import torch

from pytest_gpuperf.measure.timer import TimingConfig, measure

N, RUNS, SETTLE_S, EVERY_S, BOOST_MHZ = 4096, 10, 3.0, 0.01, 1900

pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
trace: list[tuple[float, int, float, int]] = []
done = threading.Event()


def sample() -> None:
    while not done.is_set():
        trace.append((time.perf_counter(), pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                      pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
                      pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)))
        time.sleep(EVERY_S)


a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
fn = lambda: a @ b  # noqa: E731
threading.Thread(target=sample, daemon=True).start()
t0 = time.perf_counter()
deadline = t0 + SETTLE_S
while time.perf_counter() < deadline:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
runs = []
for i in range(RUNS):
    start = time.perf_counter()
    m = measure(fn, TimingConfig(budget_s=1.0))
    runs.append((start, time.perf_counter(), m.median_ms * 1e3, m.sm_clock_mhz, len(m.batch_medians)))
    m.value = None
done.set()
time.sleep(0.05)
for i, (start, end, us, mhz, batches) in enumerate(runs, 1):
    inside = [c for t, c, _, _ in trace if start <= t <= end]
    boost = sum(c >= BOOST_MHZ for c in inside) / max(len(inside), 1)
    print(f"run {i:2} {start - t0:6.2f}-{end - t0:6.2f} s  median {us:7.2f} us  clock {mhz} MHz  "
          f"boost {boost:4.0%} of readings  batches {batches}")
print("clock changes (t s: MHz, W, throttle reasons):")
last = None
for t, c, w, reasons in trace:
    state = c >= BOOST_MHZ
    if state != last:
        print(f"  {t - t0:6.2f}: {c} MHz {w:5.0f} W reasons {reasons:#x}")
        last = state
print(f"power over the runs: median {statistics.median(w for t, _, w, _ in trace if t > runs[0][0]):.0f} W")
