"""Which use of streams leaves graph replays ~0.17 µs per node slower (no harness involved)? Graphs
of 50 and 100 fills of 4K floats, and of empty kernels, captured and replayed on a side stream;
µs per node = (graph of 100 - graph of 50) / 50, events. VARIANT: ctx_wait (the legacy stream stays
current; each capture and replay inside `with torch.cuda.stream(side)`, ordered by wait_stream with
the legacy stream, as the pytest session orders its tests), ctx_sync (the same, ordered by
torch.cuda.synchronize), set (side made current once with torch.cuda.set_stream), set_wait (side
current, plus wait_stream both ways with the legacy stream around each capture). OTHER=used: a
second side stream runs one kernel first; OTHER=idle: it is made and never used; OTHER=graph: a graph
of one empty kernel is captured and replayed on it first; OTHER=graph_default: captured with
torch.cuda.graph's own capture stream; OTHER=measure: one harness measurement of the fill first
(from the legacy stream it samples on the timer's own stream); OTHER=spin, flush, events, deep: on
the other stream, a 10 ms spin; 20 L2 flushes; 1000 timed event pairs; a graph of 50 fills replayed
1000 times back to back. RAW_ON=timer: the graphs above are
captured and replayed on the timer's own stream (Calibration.stream) instead of a new one."""
import contextlib
import os

import graph_nodes
import torch

VARIANT = os.environ.get("VARIANT", "ctx_wait")
y = torch.empty(4096, device="cuda")
if os.environ.get("RAW_ON") == "timer":
    from pytest_gpuperf.measure import calibration
    side = calibration.default().stream(torch, 0)
else:
    side = torch.cuda.Stream()
legacy = torch.cuda.default_stream()
if VARIANT.startswith("set"):
    torch.cuda.set_stream(side)
OTHER = os.environ.get("OTHER", "")
if OTHER:
    other = torch.cuda.Stream()
    if OTHER == "used":
        with torch.cuda.stream(other):
            torch.cuda._sleep(1000)
        torch.cuda.synchronize()
    elif OTHER.startswith("graph"):
        keep = torch.cuda.CUDAGraph()
        with torch.cuda.graph(keep, stream=None if OTHER == "graph_default" else other):
            torch.cuda._sleep(0)
        keep.replay()
        torch.cuda.synchronize()
    elif OTHER in ("spin", "flush", "events", "deep"):
        from pytest_gpuperf.measure import calibration
        with torch.cuda.stream(other):
            if OTHER == "spin":
                torch.cuda._sleep(20_000_000)
            elif OTHER == "flush":
                flush = calibration.default().flush(torch, 0)
                for _ in range(20):
                    flush()
            elif OTHER == "events":
                pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                         for _ in range(1000)]
                for b, e in pairs:
                    b.record()
                    e.record()
            else:
                deep = torch.cuda.CUDAGraph()
                y.fill_(1.0)
                with torch.cuda.graph(deep, stream=other):
                    for _ in range(50):
                        y.fill_(1.0)
                torch.cuda._sleep(20_000_000)
                for _ in range(1000):
                    deep.replay()
        torch.cuda.synchronize()
    elif OTHER == "measure":
        from pytest_gpuperf.measure.measurement import TimingConfig
        from pytest_gpuperf.measure.timer import measure
        first = measure(lambda: y.fill_(1.0), TimingConfig(), inputs=y).median_ms * 1e3


def on_side():
    return contextlib.nullcontext() if VARIANT.startswith("set") else torch.cuda.stream(side)


def order_before():
    if VARIANT in ("ctx_wait", "set_wait"):
        side.wait_stream(legacy)
    elif VARIANT == "ctx_sync":
        torch.cuda.synchronize()


def order_after():
    if VARIANT in ("ctx_wait", "set_wait"):
        legacy.wait_stream(side)
    elif VARIANT == "ctx_sync":
        torch.cuda.synchronize()


def graph_of(fn, n):
    g = torch.cuda.CUDAGraph()
    order_before()
    with on_side():
        fn()
    order_after()
    with torch.cuda.graph(g, stream=side):
        for _ in range(n):
            fn()
    return g


def per_node_us(fn):
    graphs = graph_of(fn, 50), graph_of(fn, 100)
    order_before()
    with on_side():
        us = graph_nodes.per_node_us(*graphs)
    order_after()
    return us

fill = per_node_us(lambda: y.fill_(1.0))
empty = per_node_us(lambda: torch.cuda._sleep(0))
print(f"VARIANT={VARIANT} OTHER={OTHER or 'none'} RAW_ON={os.environ.get('RAW_ON', 'side')}: fill/node {fill:.3f} empty/node {empty:.3f}"
      + (f" (harness first: {first:.3f})" if OTHER == "measure" else ""))
