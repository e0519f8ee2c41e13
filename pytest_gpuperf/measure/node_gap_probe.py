"""The child process that measures the graph node gap (node_gap.py): `python -m
pytest_gpuperf.measure.node_gap_probe [DEVICE]` prints it as one JSON line. CUPTI stays attached to
a process once used, so this runs apart from the tests."""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import asdict

from . import calibration
from .cuda_timer import MAX_GRAPH_CALLS
from .node_gap import DISABLE_ENV, NodeGap
from .profile import profiled_ops
from .replay_state import NODES, SPIN_MS, ReplayProbe, empty_kernel
from .timer import TimingConfig, measure

#: Measurements of the empty kernel per cache mode; their median counts.
RUNS = 3
#: Graph replays profiled for CUPTI's duration of the empty kernel.
PROFILED_REPLAYS = 20


def measure_gap(index: int) -> NodeGap:
    """In this process (the child): the harness's time per call of an empty kernel timed in a graph,
    cold and warm, less CUPTI's duration of that kernel in a graph captured before profiling; and a
    fresh process's time per node of a graph of empty kernels (replay_state.py)."""
    import torch

    torch.cuda.set_device(index)
    # First, before any large kernel (the flushes below) can slow this process's graph replays.
    fresh = torch.cuda.Stream()
    with torch.cuda.stream(fresh):
        graphs = []
        for nodes in (NODES, 2 * NODES):
            graphs.append(torch.cuda.CUDAGraph())
            with torch.cuda.graph(graphs[-1], stream=fresh):
                for _ in range(nodes):
                    empty_kernel(torch)
        spin_cycles = int(SPIN_MS * calibration.default().spin_rate(torch, index))
        node_us = ReplayProbe(torch, (graphs[0], graphs[1]), spin_cycles).per_node_us()
    probe = torch.empty(1, device="cuda")  # tells measure() that the work is on this GPU
    # The gap is the empty kernel's time replayed from the legacy default stream (where the timer's
    # callers sampled until it got a stream of its own), less CUPTI's duration: taken off events and
    # graph samples alike, it keeps events-timed calls of 20-50 µs within 2% of CUPTI's durations;
    # without it they read 0.55-0.75 µs above them (H100, docs/measurement.md).
    calibration.default().streams[index] = torch.cuda.default_stream()

    def empty() -> None:
        torch.cuda._sleep(0)

    per_call = {}
    for cache in ("cold", "warm"):
        runs = [measure(empty, TimingConfig(cache=cache, budget_s=0.2), inputs=probe, prefer="graph")
                for _ in range(RUNS)]
        per_call[cache] = statistics.median(m.median_ms for m in runs)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(MAX_GRAPH_CALLS):
            empty()
    graph.replay()
    torch.cuda.synchronize()
    durations = [e.time_range.elapsed_us() for e in profiled_ops(graph.replay, PROFILED_REPLAYS)]
    if len(durations) < MAX_GRAPH_CALLS:
        return NodeGap(problem=f"the profiler saw {len(durations)} kernels of {PROFILED_REPLAYS * MAX_GRAPH_CALLS}")
    kernel_ms = statistics.median(durations) / 1e3
    return NodeGap(cold_ms=max(per_call["cold"] - kernel_ms, 0.0), warm_ms=max(per_call["warm"] - kernel_ms, 0.0),
                   kernel_us=round(kernel_ms * 1e3, 4), measured_at=time.strftime("%Y-%m-%d %H:%M"),
                   node_us=round(node_us, 4))


def main(argv: list[str] | None = None) -> None:
    """`python -m pytest_gpuperf.measure.node_gap_probe [DEVICE]`: measure and print the gap as one JSON line."""
    args = sys.argv[1:] if argv is None else argv
    os.environ[DISABLE_ENV] = "0"  # this process's timer must not subtract a gap it is measuring
    print(json.dumps(asdict(measure_gap(int(args[0]) if args else 0))))


if __name__ == "__main__":
    main()
