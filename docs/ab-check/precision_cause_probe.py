"""Device check: what moves the precision self-check's bf16 matmul 4096 between its 1 s runs?

`PYTHONPATH=. python docs/ab-check/precision_cause_probe.py [out.json]`: the self-check's own
settle and ten runs (perf_tests/test_harness.py), with NVML read every 5 ms in a thread (SM and
memory clock, power, GPU and memory temperature, clock-event reasons). After each run, 500 calls
back to back between two events (the GPU's own speed just then). Prints per run the harness's
median, its recorded SM clock, the trace's mean SM clock over the run's samples, the loop's time per
call and its mean clock, and the spread of ten medians in time and in cycles (median x mean clock):
where the spread in cycles is small and the spread in time is not, the SM clock moved the medians.
"""
import json
import statistics
import sys
import threading
import time

import pynvml
import torch

from perf_tests.test_harness import PRECISION, _measure_dropping_result, _settle
from pytest_gpuperf.measure.device import _nvml_handle
from pytest_gpuperf.measure.timer import TimingConfig

EVERY_S, LOOP_CALLS, RUNS = 0.005, 500, 10
INDEX = torch.cuda.current_device()
HANDLE = _nvml_handle(INDEX)
trace: list[tuple] = []  # (t, sm MHz, mem MHz, power W, gpu C, mem C, reasons)
done = threading.Event()


def watch() -> None:
    while not done.is_set():
        try:
            mem_c = pynvml.nvmlDeviceGetFieldValues(HANDLE, [pynvml.NVML_FI_DEV_MEMORY_TEMP])[0].value.uiVal
        except Exception:  # noqa: BLE001
            mem_c = -1
        trace.append((time.perf_counter(),
                      pynvml.nvmlDeviceGetClockInfo(HANDLE, pynvml.NVML_CLOCK_SM),
                      pynvml.nvmlDeviceGetClockInfo(HANDLE, pynvml.NVML_CLOCK_MEM),
                      pynvml.nvmlDeviceGetPowerUsage(HANDLE) / 1e3,
                      pynvml.nvmlDeviceGetTemperature(HANDLE, pynvml.NVML_TEMPERATURE_GPU), mem_c,
                      pynvml.nvmlDeviceGetCurrentClocksEventReasons(HANDLE)))
        time.sleep(EVERY_S)


def window(t0: float, t1: float) -> dict:
    rows = [r for r in trace if t0 <= r[0] <= t1]
    if not rows:
        return {}
    reasons = 0
    for r in rows:
        reasons |= r[6]
    return {"n": len(rows), "sm_mean": statistics.fmean(r[1] for r in rows), "sm_min": min(r[1] for r in rows),
            "sm_max": max(r[1] for r in rows), "mem_mhz": sorted({r[2] for r in rows}),
            "power_w": statistics.fmean(r[3] for r in rows), "gpu_c": max(r[4] for r in rows),
            "mem_c": max(r[5] for r in rows), "reasons": hex(reasons)}


def loop_us(fn) -> tuple[float, float, float]:
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    begin.record()
    for _ in range(LOOP_CALLS):
        fn()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) * 1e3 / LOOP_CALLS, t0, time.perf_counter()


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def main() -> None:
    fn = PRECISION[1].values[0]()
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    _settle(fn)
    runs = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        m = _measure_dropping_result(fn, TimingConfig(budget_s=1.0))
        t1 = time.perf_counter()
        # the samples are the run's last measured_s of device time, give or take the host's reading
        sampled = window(t1 - m.measured_s, t1)
        loop, l0, l1 = loop_us(fn)
        runs.append({"median_us": m.median_ms * 1e3, "harness_mhz": m.sm_clock_mhz, "loaded": m.loaded,
                     "throttle": sorted(m.throttle), "method": m.method, "wall_s": t1 - t0,
                     "measured_s": m.measured_s, "run": window(t0, t1), "sampled": sampled,
                     "loop_us": loop, "loop": window(l0, l1)})
        r = runs[-1]
        print(f"  {r['median_us']:7.2f} us harness {r['harness_mhz']} MHz{' loaded' if m.loaded else ''}"
              f" | sampled mean {sampled.get('sm_mean', 0):6.0f} ({sampled.get('sm_min')}-{sampled.get('sm_max')})"
              f" mem {sampled.get('mem_mhz')} {sampled.get('power_w', 0):5.0f} W {sampled.get('gpu_c')}/{sampled.get('mem_c')} C"
              f" {sampled.get('reasons')} | loop {loop:7.2f} us at {r['loop'].get('sm_mean', 0):6.0f} MHz", flush=True)
    done.set()
    medians = [r["median_us"] for r in runs]
    cycles = [r["median_us"] * r["sampled"]["sm_mean"] for r in runs if r["sampled"]]
    loops = [r["loop_us"] for r in runs]
    loop_cycles = [r["loop_us"] * r["loop"]["sm_mean"] for r in runs if r["loop"]]
    ratio = [r["median_us"] / r["loop_us"] for r in runs]
    print(f"spread: time {spread(medians):.2%}, cycles {spread(cycles):.2%}; loop time {spread(loops):.2%}, "
          f"loop cycles {spread(loop_cycles):.2%}; harness/loop {spread(ratio):.2%}")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w", encoding="utf-8") as f:
            json.dump({"runs": runs, "gpu": torch.cuda.get_device_name()}, f, indent=1)


if __name__ == "__main__":
    main()
