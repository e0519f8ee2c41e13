"""Where does a large footprint's per-call cost in graph-timed medians come from (docs/measurement.md)?
One process: FOOTPRINT_MIB mapped before the cases' tensors (or after them, FOOTPRINT_AFTER=1), then per
case, in µs per call: the harness (cold, warm), events around a graph of CALLS calls (without and
with a read flush before each replay), events around CALLS eager calls queued behind a spin, and
CUPTI's durations and start-to-start intervals of the same graph and queued eager calls."""
import os
import statistics

import torch
import torch.nn.functional as F

from pytest_gpuperf.measure.measurement import TimingConfig
from pytest_gpuperf.measure.profile import calls_of, op_names, profiled_ops
from pytest_gpuperf.measure.timer import measure

CALLS, REPS, SPIN_CYCLES = 50, 60, 2_000_000
MIB = int(os.environ.get("FOOTPRINT_MIB", "0"))
AFTER = os.environ.get("FOOTPRINT_AFTER") == "1"
held = None
if os.environ.get("SET_DEVICE") == "1":
    torch.cuda.set_device(0)
if MIB and not AFTER:
    held = torch.ones(MIB << 20, dtype=torch.uint8, device="cuda")


def case(name):
    op, n = name.split("-")
    n = {"4K": 1 << 12, "1M": 1 << 20, "16M": 1 << 24}[n]
    if op == "fill":
        y = torch.empty(n, device="cuda")
        return (lambda: y.fill_(1.0)), y
    x = torch.randn(n, device="cuda")
    if op == "two":  # two kernels per call
        return (lambda: x.add(1.0).mul_(2.0)), x
    if op == "four":  # four kernels per call
        return (lambda: x.add(1.0).mul_(2.0).sub_(3.0).div_(4.0)), x
    return (lambda: F.gelu(x)), x


names = ["fill-4K", "gelu-4K", "two-4K", "four-4K", "fill-1M", "gelu-1M", "four-1M", "gelu-16M"]
cases = {n: case(n) for n in names}
flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
graphs = {}
for n, (fn, _) in cases.items():
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(CALLS):
            fn()
    graphs[n] = g
if MIB and AFTER:
    held = torch.ones(MIB << 20, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()


def timed(body, flush=False):
    out = []
    for _ in range(REPS):
        if flush:
            flush_buf.sum()
        torch.cuda._sleep(SPIN_CYCLES)
        b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        b.record()
        body()
        e.record()
        e.synchronize()
        out.append(b.elapsed_time(e) * 1e3 / CALLS)
    return statistics.median(out)


def eager(fn):
    def body():
        for _ in range(CALLS):
            fn()
    return body


def cupti(fn, run):
    nm = op_names(fn)
    found = calls_of(profiled_ops(run, 4), nm)
    starts = [c[0].time_range.start for c in found]
    steps = [b - a for a, b in zip(starts, starts[1:]) if b - a < 100]
    return (statistics.median(sum(e.device_time_total for e in c) for c in found), statistics.median(steps))


rows = []
for n, (fn, inputs) in cases.items():
    cold = measure(fn, TimingConfig(), inputs=inputs)
    warm = measure(fn, TimingConfig(cache="warm"), inputs=inputs)
    rows.append((n, cold.median_ms * 1e3, cold.method, warm.median_ms * 1e3, timed(graphs[n].replay),
                 timed(graphs[n].replay, flush=True), timed(eager(fn))))
for i, (n, (fn, _)) in enumerate(cases.items()):
    g = graphs[n]

    def queued():
        torch.cuda._sleep(SPIN_CYCLES)
        eager(fn)()
    rows[i] += cupti(fn, g.replay) + cupti(fn, queued)
print(f"footprint {MIB} MiB {'after' if AFTER else 'before'} the cases; µs per call")
print("case      harness(cold,method)  warm   ev-graph ev-graph+flush ev-eager-queued  cupti-graph dur/step  cupti-eager dur/step")
for r in rows:
    print(f"{r[0]:9} {r[1]:8.3f} {r[2]:7} {r[3]:8.3f} {r[4]:8.3f} {r[5]:8.3f} {r[6]:8.3f}   {r[7]:7.3f} {r[8]:7.3f}   {r[9]:7.3f} {r[10]:7.3f}")
