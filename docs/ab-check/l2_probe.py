"""Where the harness's cold-L2 samples stand against a profiler's back-to-back steady state (issue 25's
evidence): for a read-heavy op (sum), a write-only op (fill) and an elementwise op (GeLU), fp32 and
bf16, 4K to 256M elements, print and write as JSON lines:

- `old`: samples framed [flush][start][call][end] (the call's dirty lines are written back after
  its sample), `new`: [start][call][flush][end] less a clean flush (this gpuperf), `warm`;
- `b2b`: the median CUPTI time per call of 200 eager calls back to back after 0.5 s of warm calls;
- `graph`: the median CUPTI time per call of the same calls replayed in a 50-call CUDA graph (the
  launch mode's share of a difference);
- `do_bench`: triton.testing.do_bench's median.

Usage on a GPU: `python docs/ab-check/l2_probe.py OUT.jsonl [--sizes 4096,1048576]`.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from pytest_gpuperf.measure.calibration import Calibration, gc_paused
from pytest_gpuperf.measure.cuda_timer import CudaTimer
from pytest_gpuperf.measure.profile import device_events
from pytest_gpuperf.measure.timer import TimingConfig, measure

SIZES = [4096 * 4**k for k in range(10)]  # 4K .. 1G? capped below
OPS = ("sum", "fill", "gelu")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


class OldFraming(CudaTimer):
    """The framing before timing version 5: the flush opens a sample, outside its events."""

    def _batch(self, body, n, host_ms, flush, sync, each_ms=0.0, stamps=None):
        torch_ = self.torch
        events = [(self._event(), self._event()) for _ in range(n)]
        with gc_paused():
            self._pad(host_ms * 2)
            for i, (begin, end) in enumerate(events):
                if stamps is not None and i < 32:
                    stamps.append(time.perf_counter())
                if each_ms > 0:
                    self._pad(each_ms)
                if flush is not None:
                    flush()
                begin.record()
                body()
                if sync:
                    torch_.cuda.synchronize()
                end.record()
            torch_.cuda.synchronize()
        return [b.elapsed_time(e) for b, e in events]


def make(op: str, dtype, numel: int):
    if op == "sum":
        x = torch.randn(numel, device="cuda", dtype=dtype)
        return (lambda: torch.sum(x)), x
    if op == "fill":
        y = torch.empty(numel, device="cuda", dtype=dtype)
        return (lambda: y.fill_(1.0)), y
    x = torch.randn(numel, device="cuda", dtype=dtype)
    return (lambda: F.gelu(x)), x


def per_call_us(prof_events, names, calls_expected):
    calls, i = [], 0
    while i + len(names) <= len(prof_events):
        if [e.name for e in prof_events[i:i + len(names)]] == names:
            calls.append(prof_events[i:i + len(names)])
            i += len(names)
        else:
            i += 1
    calls = calls[-calls_expected:]
    return statistics.median(sum(e.device_time_total for e in c) for c in calls), len(calls)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES if s <= 256 << 20))
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    from triton.testing import do_bench

    cal_new, cal_old = Calibration(), Calibration()
    rows = []
    for dname, dtype in DTYPES.items():
        for op in OPS:
            for numel in sizes:
                fn, inp = make(op, dtype, numel)
                fn()
                row = {"op": op, "dtype": dname, "numel": numel, "fn": fn}
                for rep in range(args.repeats):
                    new = measure(fn, TimingConfig(), inputs=inp, calibration=cal_new)
                    old = OldFraming(fn, TimingConfig(), inp, None, calibration=cal_old).run()
                    warm = measure(fn, TimingConfig(cache="warm"), inputs=inp, calibration=cal_new)
                    for key, m in (("new", new), ("old", old), ("warm", warm)):
                        row.setdefault(key, []).append(round(m.median_ms * 1e3, 4))
                        row.setdefault(key + "_noise", []).append(round(m.stats.noise, 5))
                        row[key + "_method"] = m.method
                row["do_bench"] = round(do_bench(fn, return_mode="median") * 1e3, 4)
                rows.append(row)
                print(f"{op:5} {dname} {numel:>10} new {row['new']} old {row['old']} warm {row['warm']} "
                      f"({row['new_method']}) do_bench {row['do_bench']}", flush=True)
    print("new-framing calibration: frames", cal_new.frames, "flush", cal_new.flush_ms, flush=True)
    print("old-framing calibration: frames", cal_old.frames, flush=True)
    # Profiling last: CUPTI stays attached and doubles each launch's host cost.
    from torch.profiler import ProfilerActivity, profile

    for row in rows:
        fn = row.pop("fn")
        with profile(activities=[ProfilerActivity.CUDA]) as probe:
            fn()
            torch.cuda.synchronize()
        names = [e.name for e in device_events(probe)]
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        with torch.cuda.graph(graph):
            for _ in range(50):
                fn()
        deadline = time.perf_counter() + 0.5
        while time.perf_counter() < deadline:
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(200):
                fn()
            torch.cuda.synchronize()
        row["b2b"], row["b2b_calls"] = per_call_us(device_events(prof), names, 200)
        graph.replay()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(4):
                graph.replay()
            torch.cuda.synchronize()
        row["graph"], row["graph_calls"] = per_call_us(device_events(prof), names, 200)
        del graph
        print(f"{row['op']:5} {row['dtype']} {row['numel']:>10} new {statistics.median(row['new']):10.3f} "
              f"old {statistics.median(row['old']):10.3f} warm {statistics.median(row['warm']):10.3f} "
              f"b2b {row['b2b']:10.3f} graph {row['graph']:10.3f} do_bench {row['do_bench']:10.3f} "
              f"({row['new_method']})", flush=True)
    with open(args.out, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
