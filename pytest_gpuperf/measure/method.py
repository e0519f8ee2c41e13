"""Which method times a call: events around each sample, or a CUDA graph of many calls, from the
call's GPU time, the host's time to launch it and the L2 flush ahead of it (docs/measurement.md,
"Events or graphs")."""
from __future__ import annotations

import math

from ..core.records import Method
from .host_pace import LAUNCH_BOUND_RATIO

#: Calls shorter than this (GPU time) are timed in CUDA graphs: events resolve ~0.5 µs and a launch
#: costs several µs.
GRAPH_BELOW_MS = 0.02
#: ... unless its baseline was timed with events: then events are kept up to a whole sample's GPU
#: time, so the method does not flip with the host's speed near the boundary.
PREFERRED_EVENTS_RATIO = 1.0
#: GPU time a CUDA-graph replay aims for: long enough for events to resolve 0.1% ...
GRAPH_REPLAY_MS = 2.0
#: ... in at most this many calls: a GPU can space out the kernels of longer graphs.
MAX_GRAPH_CALLS = 50
#: A call whose samples run back to back (no L2 flush ahead: warm mode, or a call larger than the
#: L2) is timed in a graph below this GPU time: a graph's calls run back to back too, so it times
#: the same work without the event pair, whose leftover error (0.0-0.6 µs a sample on an H100,
#: varying by process) is over 0.5% of a shorter call (docs/measurement.md, "Events or graphs").
BACK_TO_BACK_GRAPH_BELOW_MS = 0.1


def launch_bound(gpu_ms: float, host_ms: float, flush_ms: float, prefer: str | None = None) -> bool:
    """Does the call need a CUDA graph? Yes when events can't resolve it or the host cannot stay ahead
    of a whole sample's GPU time (the L2 flush included); a preferred method (the baseline's) wins
    where it can measure the call honestly."""
    if prefer == Method.GRAPH.value:
        return True
    if prefer == Method.EVENTS.value:
        return host_ms > PREFERRED_EVENTS_RATIO * (gpu_ms + flush_ms)
    return host_ms > LAUNCH_BOUND_RATIO * (gpu_ms + flush_ms) or gpu_ms < GRAPH_BELOW_MS


def graph_timed(gpu_ms: float, host_ms: float, flush_ms: float, flushed: bool, prefer: str | None = None,
                room: bool = True) -> bool:
    """Time in a CUDA graph? Where the call is launch-bound (above), and, with no baseline method to
    keep, where its samples run back to back (not `flushed`), it is shorter than
    BACK_TO_BACK_GRAPH_BELOW_MS and the device has `room` for a graph of its calls."""
    back_to_back = prefer is None and not flushed and room and gpu_ms < BACK_TO_BACK_GRAPH_BELOW_MS
    return back_to_back or launch_bound(gpu_ms, host_ms, flush_ms, prefer)


def graph_calls(gpu_ms: float) -> int:
    """Calls captured in one graph: about GRAPH_REPLAY_MS of GPU time, 10 to MAX_GRAPH_CALLS."""
    return max(10, min(MAX_GRAPH_CALLS, math.ceil(GRAPH_REPLAY_MS / max(gpu_ms, 1e-4))))
