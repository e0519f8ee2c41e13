"""The gap a GPU leaves after a kernel before the next one starts, measured once per GPU with CUPTI.

A sample reads a call as a CUDA graph replays it (timing.py): its kernels, plus the gap after its
last kernel before the next call's first one starts. A profiler's kernel time (CUPTI's start and
end stamps) leaves that gap out, and for a 1-2 µs kernel it is 10-30% of the time. The timer
subtracts it once per call, so a call reads as a profiler shows it: from its first kernel's start
to its last kernel's end (the gaps between a call's own kernels stay in).

Only CUPTI tells a kernel from the gap after it, and once attached it stays attached: every later
launch of the process costs twice the host time (on an H100), and a graph captured meanwhile has
its nodes spaced out. So the gap is measured in a child process: the harness's own time per call
of an empty kernel in a graph, less CUPTI's duration of that kernel, per cache mode (after an L2
flush a graph's nodes start later, their launch parameters evicted with the data: on an H100 an
empty kernel cost 0.32 µs per node beyond its CUPTI duration cold, 0.14 µs warm). It is kept in a
JSON file in the user's cache directory, per GPU (by UUID: H100s differed), driver, torch version
and timing version; `GPUPERF_NODE_GAP=0` turns the subtraction off.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

DISABLE_ENV = "GPUPERF_NODE_GAP"
CACHE_DIR_ENV = "GPUPERF_CACHE_DIR"
# A child imports torch, initialises CUDA, times an empty kernel twice over and starts the first
# profiling session of its process (5-6 s on an H100 host): ~15 s in all.
CHILD_TIMEOUT_S = 180.0
# Measurements of the empty kernel per cache mode; their median counts.
RUNS = 3


@dataclass(frozen=True)
class NodeGap:
    """ms subtracted per call, per cache mode; `problem` says why nothing is subtracted."""

    cold_ms: float = 0.0
    warm_ms: float = 0.0
    kernel_us: float | None = None  # CUPTI's duration of the empty kernel
    measured_at: str | None = None
    problem: str | None = None

    def for_cache(self, cache: str) -> float:
        return self.cold_ms if cache == "cold" else self.warm_ms

    def describe(self) -> str:
        """One line for the session header."""
        if self.problem:
            return f"graph node gap not subtracted: {self.problem}"
        return (f"graph node gap {self.cold_ms * 1e3:.2f} µs cold / {self.warm_ms * 1e3:.2f} µs warm subtracted per "
                f"call (CUPTI, {self.measured_at}; {cache_path()})")


_KNOWN: dict[int, NodeGap] = {}


def cache_path() -> Path:
    base = os.environ.get(CACHE_DIR_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pytest-gpuperf")
    return Path(base) / "node-gap.json"


def _key(index: int) -> str:
    import torch

    from .device import software_versions
    from .timing import TIMING_VERSION

    props = torch.cuda.get_device_properties(index)
    sw = software_versions()
    return (f"{props.name}|{getattr(props, 'uuid', '')}|driver {sw.get('driver')}|torch {sw.get('torch')}"
            f"|timing {TIMING_VERSION}")


def _off() -> NodeGap | None:
    return NodeGap(problem=f"{DISABLE_ENV}=0") if os.environ.get(DISABLE_ENV, "").strip() == "0" else None


def lookup(index: int) -> NodeGap:
    """The gap of CUDA device `index`: from this process's memory, the cache file, or a child's
    measurement (stored for later runs); a failure is remembered for the process, not stored."""
    off = _off()
    if off:
        return off
    if index not in _KNOWN:
        _KNOWN[index] = _cached_or_measured(index)
    return _KNOWN[index]


def known(index: int) -> NodeGap | None:
    """The gap of device `index` if this process or the cache file has it already; None where
    `lookup` would have to measure it. A session that only collects tests (`--collect-only`) need
    not spend the ~15 s of a measurement on its header."""
    return _off() or _KNOWN.get(index) or _stored(_read(cache_path()), _key(index))


def _stored(stored: dict, key: str) -> NodeGap | None:
    try:
        return NodeGap(**stored[key])
    except (KeyError, TypeError):  # not there, or not an entry this version wrote
        return None


def _cached_or_measured(index: int) -> NodeGap:
    from filelock import FileLock, Timeout

    from .baseline import atomic_write_text  # baseline imports timing, which imports this module

    path, key = cache_path(), _key(index)
    lock = FileLock(str(path) + ".lock", timeout=CHILD_TIMEOUT_S + 30)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()  # xdist workers on one machine: one child at a time, each GPU measured once
    except (OSError, Timeout):  # no usable cache directory: measure, keep nothing
        return _measure_in_child(index)
    try:
        stored = _read(path)
        gap = _stored(stored, key)
        if gap is not None:
            return gap
        gap = _measure_in_child(index)
        if gap.problem is None:
            stored[key] = asdict(gap)
            try:
                atomic_write_text(path, json.dumps(stored, indent=1, sort_keys=True))
            except OSError:
                pass  # a cache that cannot be written only costs the next run a measurement
        return gap
    finally:
        lock.release()


def _read(path: Path) -> dict:
    """The stored gaps; an unreadable file counts as empty (it is a cache: it will be rewritten)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _measure_in_child(index: int) -> NodeGap:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "pytest_gpuperf.node_gap", str(index)]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return NodeGap(problem=f"measuring it failed ({type(exc).__name__}: {exc})")
    lines = out.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if out.returncode == 0 and lines else None
        gap = NodeGap(**result) if isinstance(result, dict) else None
    except (ValueError, TypeError):
        gap = None
    if gap is None:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return NodeGap(problem=f"measuring it failed (`{' '.join(cmd[1:])}` exited {out.returncode}: {tail})")
    return gap


def measure_gap(index: int) -> NodeGap:
    """In this process (the child): the harness's time per call of an empty kernel timed in a graph,
    cold and warm, less CUPTI's duration of that kernel in a graph captured before profiling."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from .profile import device_events
    from .timing import MAX_GRAPH_CALLS, TimingConfig, measure

    torch.cuda.set_device(index)
    probe = torch.empty(1, device="cuda")  # tells measure() that the work is on this GPU

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
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            graph.replay()
        torch.cuda.synchronize()
    durations = [e.time_range.elapsed_us() for e in device_events(prof)]
    if len(durations) < MAX_GRAPH_CALLS:
        return NodeGap(problem=f"the profiler saw {len(durations)} kernels of {20 * MAX_GRAPH_CALLS}")
    kernel_ms = statistics.median(durations) / 1e3
    return NodeGap(cold_ms=max(per_call["cold"] - kernel_ms, 0.0), warm_ms=max(per_call["warm"] - kernel_ms, 0.0),
                   kernel_us=round(kernel_ms * 1e3, 4), measured_at=time.strftime("%Y-%m-%d %H:%M"))


def main(argv: list[str] | None = None) -> None:
    """`python -m pytest_gpuperf.node_gap [DEVICE]`: measure and print the gap as one JSON line."""
    args = sys.argv[1:] if argv is None else argv
    os.environ[DISABLE_ENV] = "0"  # this process's timer must not subtract a gap it is measuring
    print(json.dumps(asdict(measure_gap(int(args[0]) if args else 0))))


if __name__ == "__main__":
    main()
