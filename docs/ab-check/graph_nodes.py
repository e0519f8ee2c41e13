"""Shared by the stream probes here: a graph's time per node without the harness, as (a replay of
the graph of 2n nodes - a replay of the graph of n) / n, each pair behind a 0.5 ms spin, by events."""
import statistics

import torch


def per_node_us(short, long, nodes: int = 50, reps: int = 20) -> float:
    """Median µs per node of `long` (2 * `nodes` nodes) over `short` (`nodes`), replayed on the
    current stream."""
    diffs = []
    for _ in range(reps):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        torch.cuda._sleep(1_000_000)
        ev[0].record()
        short.replay()
        ev[1].record()
        long.replay()
        ev[2].record()
        torch.cuda.synchronize()
        diffs.append((ev[1].elapsed_time(ev[2]) - ev[0].elapsed_time(ev[1])) / nodes * 1e3)
    return statistics.median(diffs)
