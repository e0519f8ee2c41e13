"""When does a plain process's graph-timed fill of 4K floats go from CUPTI's duration to ~0.35 µs
above it? Prints, every iteration, the seconds since start, the harness's median, a fill's and an
empty kernel's time per graph node ((graph of 100 - graph of 50) / 50, events, own stream) and the
SM clock. NVML=0: the harness reads no clocks; IDLE_S: seconds of host sleep between iterations;
SET_STREAM=1: the process makes a stream of its own current (torch.cuda.set_stream) before anything
runs, so measure()'s caller is not on the legacy default stream."""
import os
import statistics
import time

import graph_nodes
import torch

from pytest_gpuperf.measure import calibration, cuda_timer
from pytest_gpuperf.measure.device import ClockState, read_clocks
from pytest_gpuperf.measure.measurement import TimingConfig
from pytest_gpuperf.measure.profile import profiled_ops
from pytest_gpuperf.measure.timer import measure

if os.environ.get("NVML") == "0":
    cuda_timer.read_clocks = lambda index: ClockState()
IDLE_S = float(os.environ.get("IDLE_S", "0"))
start = time.perf_counter()
y = torch.empty(4096, device="cuda")
side = torch.cuda.Stream()
if os.environ.get("SET_STREAM") == "1":
    torch.cuda.set_stream(side)


def graph_of(fn, n):
    g = torch.cuda.CUDAGraph()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(g, stream=side):
        for _ in range(n):
            fn()
    return g


def fill():
    y.fill_(1.0)


def empty():
    torch.cuda._sleep(0)


graphs = {name: (graph_of(fn, 50), graph_of(fn, 100)) for name, fn in (("fill", fill), ("empty", empty))}


def per_node_us(name):
    with torch.cuda.stream(side):
        return graph_nodes.per_node_us(*graphs[name])

for i in range(int(os.environ.get("ITERS", "30"))):
    t = time.perf_counter() - start
    m = measure(fill, TimingConfig(), inputs=y)
    h = m.median_ms * 1e3
    w = measure(fill, TimingConfig(cache="warm"), inputs=y).median_ms * 1e3
    frames = {k[1]: f"{v[0] * 1e3:.2f}" for k, v in calibration.default().frames.items()}
    print(f"t={t:6.2f}s {m.method} x{m.calls_per_sample} flushed {m.flushed} gap {m.node_gap_ms * 1e3:.2f} "
          f"frames {frames} flush {calibration.default().flush_ms.get(0, 0) * 1e3:.2f} raw/call "
          f"{h + (m.node_gap_ms * 1e3 + float(frames.get(m.flushed, 0))) / m.calls_per_sample:.3f} warm {w:.3f} | "
          f"harness {h:.3f} fill/node {per_node_us('fill'):.3f} empty/node {per_node_us('empty'):.3f} "
          f"sm {read_clocks(0).sm_clock_mhz}", flush=True)
    time.sleep(IDLE_S)
cupti = statistics.median(e.time_range.elapsed_us() for e in profiled_ops(graphs["fill"][0].replay, 4))
print(f"NVML={os.environ.get('NVML', '1')} IDLE_S={IDLE_S} SET_STREAM={os.environ.get('SET_STREAM', '0')}: CUPTI fill {cupti:.3f}")
