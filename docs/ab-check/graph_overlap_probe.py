"""Device check: why do graph-timed calls of 1M elements read under CUPTI's graph durations?

`PYTHONPATH=. python docs/ab-check/graph_overlap_probe.py`: for a fill, a row sum and GeLU (fp32 and
bf16) of 64K, 1M and 16M elements, all tensors made first, prints

- the harness's median (its method), and for calls it times with events also its graph-timed median;
- the memory the two graphs below reserved (their calls' outputs, reused within a capture or not);
- before any profiling, on the timer's stream: the time per call of a 50-call graph replayed alone
  behind a spin (events around it, median of 10), and the marginal time per node (100-call graph
  minus 50-call graph, over 50), each with and without an L2 flush ahead;
- CUPTI on the same 50-call graph replayed 4 times on that stream: median duration, median interval
  from one kernel's start to the next's, and median and lowest gap from one kernel's end to the
  next's start (negative: the next kernel started before the one ahead of it ended);
- the unwatched replay again after profiling.

It answers whether CUPTI's duration is a call's time per call in a loop, or overlaps its neighbours.
"""
import statistics

import torch

from perf_tests.test_steady_state import DTYPES, _op
from pytest_gpuperf.measure import calibration
from pytest_gpuperf.measure.profile import calls_of, op_names, profiled_ops
from pytest_gpuperf.measure.timer import TimingConfig, measure

SIZES = {"64K": 1 << 16, "1M": 1 << 20, "16M": 1 << 24}
CALLS, REPLAYS, REPEATS = 50, 4, 10
SPIN = 2_000_000

cal = calibration.default()


def graph_of(fn, calls):
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=torch.cuda.current_stream()):
        for _ in range(calls):
            fn()
    return g


def replay_us(g, flush):
    times = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(SPIN)
        if flush is not None:
            flush()
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


cases = {f"{op} {d} {s}": _op(op, DTYPES[d], SIZES[s]) for d in DTYPES for op in ("fill", "sum", "gelu") for s in SIZES}
flush = cal.flush(torch, torch.cuda.current_device())
rows = {}
with cal.on_stream(torch, torch.cuda.current_device()):
    for name, (fn, x) in cases.items():
        m = measure(fn, TimingConfig(), inputs=x)
        line = f"{name:15} harness {m.median_ms * 1e3:8.3f} us ({m.method}, {'flushed' if m.flushed else 'b2b'})"
        if m.method == "events":
            mg = measure(fn, TimingConfig(), inputs=x, prefer="graph")
            line += f" graph-timed {mg.median_ms * 1e3:8.3f} us"
        rows[name] = line
    graphs = {}
    for name, (fn, x) in cases.items():
        torch.cuda.synchronize()
        reserved = torch.cuda.memory_reserved()
        g50, g100 = graph_of(fn, CALLS), graph_of(fn, 2 * CALLS)
        rows[name] += f" graphs of {CALLS}+{2 * CALLS} calls reserved {(torch.cuda.memory_reserved() - reserved) / 2**20:7.1f} MiB"
        graphs[name] = g50
        for label, fl in (("cold", flush), ("warm", None)):
            t50, t100 = replay_us(g50, fl), replay_us(g100, fl)
            rows[name] += f"  {label}: per call {t50 / CALLS:8.3f} per node {(t100 - t50) / CALLS:8.3f}"
    for name, (fn, x) in cases.items():
        names = op_names(fn)
        g = graphs[name]
        ops = profiled_ops(lambda: [g.replay() for _ in range(REPLAYS)])
        found = calls_of(ops, names)
        dur = [sum(e.time_range.end - e.time_range.start for e in c) for c in found]
        starts = [c[0].time_range.start for c in found]
        ends = [c[-1].time_range.end for c in found]
        step = [b - a for a, b in zip(starts, starts[1:])]
        gaps = [s - e for e, s in zip(ends, starts[1:])]
        after = replay_us(g, None) / CALLS
        rows[name] += (f"  CUPTI dur {statistics.median(dur):8.3f} step {statistics.median(step):8.3f}"
                       f" gap med {statistics.median(gaps):+6.3f} min {min(gaps):+6.3f}  after {after:8.3f}")
for line in rows.values():
    print(line, flush=True)
