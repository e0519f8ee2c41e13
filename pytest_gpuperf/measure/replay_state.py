"""Does this process replay CUDA graphs slower than a fresh one?

Once a large kernel has run in a process (ten bf16 4096 matmuls on any stream are enough), every later
graph replay in it runs ~0.18 µs per node slower on an H100, on every stream, old or new, and
graph-timed medians of 1-46 µs calls read ~0.37 µs per call high; nothing tried undoes it
(docs/measurement.md, "Replay state"). The probe times one node of a graph of empty kernels. The
node-gap child (node_gap_probe.py) takes it in a fresh process, the timer after each graph-timed
measurement, and a difference of at least SLOW_REPLAY_US goes with the result (`slow_replay_us`),
so that the gate can tell that state from a slowdown of the code (core/verdict.py).
"""
from __future__ import annotations

import statistics
from typing import Any

#: Nodes of the shorter probe graph; the longer one has twice as many.
NODES = 50
#: Pairs of replays timed; their median counts.
REPLAYS = 15
#: GPU time of the spin ahead of each pair, so the host's launches never set the pace.
SPIN_MS = 0.2
#: µs per node above the fresh process's reading from which a process counts as slowed: fresh
#: processes read within 0.01 µs of one another, the slowed state 0.17-0.19 µs above them (H100).
SLOW_REPLAY_US = 0.05


def empty_kernel(torch: Any) -> None:
    """The probe's node: a spin of no cycles."""
    torch.cuda._sleep(0)


class ReplayProbe:
    """Graphs of NODES and 2 * NODES empty kernels (`graphs`, captured by the caller), replayed on
    the current stream."""

    def __init__(self, torch: Any, graphs: tuple[Any, Any], spin_cycles: int) -> None:
        self.torch = torch
        self.graphs = graphs
        self.spin_cycles = spin_cycles

    def per_node_us(self) -> float:
        """µs per node on the current stream: (a replay of the longer graph - one of the shorter) /
        NODES, by events, behind a spin."""
        torch = self.torch
        marks = []
        for _ in range(REPLAYS):
            events = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            torch.cuda._sleep(self.spin_cycles)
            events[0].record()
            self.graphs[0].replay()
            events[1].record()
            self.graphs[1].replay()
            events[2].record()
            marks.append(events)
        marks[-1][2].synchronize()
        return statistics.median((b.elapsed_time(c) - a.elapsed_time(b)) * 1e3 / NODES for a, b, c in marks)


def slowed_by(now_us: float, fresh_us: float | None) -> float | None:
    """µs per node this process's replays run above a fresh process's, where that reaches
    SLOW_REPLAY_US; None where it does not or no fresh reading is known."""
    if fresh_us is None:
        return None
    excess = now_us - fresh_us
    return round(excess, 3) if excess >= SLOW_REPLAY_US else None
