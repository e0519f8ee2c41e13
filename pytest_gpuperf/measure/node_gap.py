"""The gap a GPU leaves after the frame calibration's spin kernel in a graph replayed from the legacy
default stream, measured once per GPU with CUPTI (from a stream of its own the gap is 0, but events
samples then read 0.55-0.75 µs above CUPTI on an H100: docs/measurement.md).

The frame's cost is calibrated against a spin's time per call in a graph, which holds that gap, so
every sample reads it once on top of its calls; the timer subtracts it once per sample. (Real
kernels replayed back to back in a graph leave no such gap: their time per call is CUPTI's duration,
docs/measurement.md.) CUPTI stays attached once used, so a child process measures it
(node_gap_probe.py), before the session selects the device (plugin.session); the result is cached in
a JSON file per GPU (by UUID), driver, torch and timing version. `GPUPERF_NODE_GAP=0` turns the
subtraction off.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.files import atomic_write_text
from ..core.records import CacheMode
from ..core.versions import TIMING_VERSION
from .device import software_versions

DISABLE_ENV = "GPUPERF_NODE_GAP"
CACHE_DIR_ENV = "GPUPERF_CACHE_DIR"
#: A child takes ~15 s (torch import, CUDA init, two timings, the process's first profiling session).
CHILD_TIMEOUT_S = 180.0
#: The module a child runs (`python -m`) to measure the gap.
PROBE_MODULE = "pytest_gpuperf.measure.node_gap_probe"
#: What the child measures beyond the gap: 1, a fresh process's graph replay (node_us, replay_state.py).
#: Part of the cache key, so entries written before it (or by another version) are not mistaken for it.
PROBE_VERSION = 1


@dataclass(frozen=True)
class NodeGap:
    """ms subtracted per sample, per cache mode; `problem` says why nothing is subtracted."""

    cold_ms: float = 0.0
    warm_ms: float = 0.0
    kernel_us: float | None = None  # CUPTI's duration of the empty kernel
    measured_at: str | None = None
    problem: str | None = None
    node_us: float | None = None  # µs per node of a graph of empty kernels in a fresh process (replay_state.py)

    def for_cache(self, cache: str) -> float:
        return self.cold_ms if cache == CacheMode.COLD.value else self.warm_ms

    def describe(self) -> str:
        """One line for the session header."""
        if self.problem:
            return f"graph node gap not subtracted: {self.problem}"
        fresh = f"; a fresh process replays graphs at {self.node_us:.2f} µs per node" if self.node_us else ""
        return (f"graph node gap {self.cold_ms * 1e3:.2f} µs cold / {self.warm_ms * 1e3:.2f} µs warm subtracted per "
                f"sample (CUPTI, {self.measured_at}; {cache_path()}){fresh}")


_KNOWN: dict[int, NodeGap] = {}


def cache_path() -> Path:
    base = os.environ.get(CACHE_DIR_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pytest-gpuperf")
    return Path(base) / "node-gap.json"


def _key(index: int) -> str:
    import torch

    props = torch.cuda.get_device_properties(index)
    sw = software_versions()
    return (f"{props.name}|{getattr(props, 'uuid', '')}|driver {sw.get('driver')}|torch {sw.get('torch')}"
            f"|timing {TIMING_VERSION}|replay probe {PROBE_VERSION}")


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
    """The stored gap of GPU `index`, or a child's measurement of it, stored. A lock per GPU makes
    the processes of one GPU measure it once, while the GPUs of a host (pytest-xdist's workers) are
    measured at once: one lock for all of them made a fresh 4-GPU host wait four children in turn."""
    from filelock import FileLock, Timeout

    path, key = cache_path(), _key(index)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    lock = FileLock(f"{path}.{digest}.lock", timeout=CHILD_TIMEOUT_S + 30)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except (OSError, Timeout):  # no usable cache directory: measure, keep nothing
        return _measure_in_child(index)
    try:
        gap = _stored(_read(path), key)
        if gap is not None:
            return gap
        gap = _measure_in_child(index)
        if gap.problem is None:
            _store(path, key, gap)
        return gap
    finally:
        lock.release()


def _store(path: Path, key: str, gap: NodeGap) -> None:
    """Add `gap` to the file under its own lock: other GPUs' processes write theirs meanwhile. A cache
    that cannot be written only costs the next run a measurement."""
    from filelock import FileLock, Timeout

    try:
        with FileLock(str(path) + ".lock", timeout=30):
            stored = _read(path)
            stored[key] = asdict(gap)
            atomic_write_text(path, json.dumps(stored, indent=1, sort_keys=True))
    except (OSError, Timeout):
        pass


def _read(path: Path) -> dict:
    """The stored gaps; an unreadable file counts as empty (it is a cache: it will be rewritten)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _measure_in_child(index: int) -> NodeGap:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the directory holding pytest_gpuperf
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", PROBE_MODULE, str(index)]
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
