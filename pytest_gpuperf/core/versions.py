"""Timing versions: what a sample measures, recorded with each result, so that results timed
differently are never compared as if they were timed alike."""
from __future__ import annotations

from .records import Method

#: The version this gpuperf measures with. A change names the methods whose samples it moved;
#: results of the other methods compare across it.
TIMING_VERSION = 4
CUDA_METHODS = (Method.EVENTS.value, Method.GRAPH.value, Method.QUEUED.value, Method.DEVICE_SYNC.value)
TIMING_CHANGES = {  # version -> (methods it changed, what changed)
    2: (CUDA_METHODS, "CUDA event samples no longer include the ~1 µs latency of a kernel launched between two "
                      "events (they read the call as it runs in a stream, as graph replays do)"),
    3: (CUDA_METHODS,
        "CUDA event samples no longer include the ~1 µs gap between two kernels queued eagerly (they read the "
        "call as a graph replay does: up to ~1.5 µs less per sample on an H100), and graphs hold at most 50 "
        "calls (a GPU can space the kernels of longer graphs out: a 1 µs kernel read up to 25% less)"),
    4: ((Method.EVENTS.value, Method.GRAPH.value, Method.QUEUED.value),
        "samples no longer include the gap a GPU leaves after a call's last kernel before the next kernel starts "
        "(measured per GPU with CUPTI: 0.1-0.4 µs per call on an H100); a call reads as a profiler's kernel time"),
}


def recorded_version(entry: dict) -> int | None:
    """The timing version an entry or result record was measured with: 1 when it records none
    (measured before versions were recorded); None when the value is not a positive integer (or
    its digits as a string)."""
    value = entry.get("timing", 1)
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _changed(version: int, entry: dict) -> bool:
    """Whether timing version `version` moved the samples of an entry's method (assumed so for an
    entry that does not say how it was timed)."""
    method = entry.get("method")
    return not method or method in TIMING_CHANGES[version][0]


def timing_epoch(entry: dict) -> int | None:
    """The newest timing version, up to the entry's own, that changed how its method reads (1 when
    none did): two results were measured the same way when their epochs are equal. A version newer
    than this gpuperf's is its own epoch; None: not a version."""
    version = recorded_version(entry)
    if version is None or version > TIMING_VERSION:
        return version
    return max([1] + [v for v in TIMING_CHANGES if v <= version and _changed(v, entry)])


def version_note(entry: dict) -> str | None:
    """What differs between an entry's timing and this gpuperf's for its method, or None."""
    version = recorded_version(entry)
    if version is None:
        return f"an unknown timing version (this gpuperf measures with {TIMING_VERSION})"
    if timing_epoch(entry) == timing_epoch(dict(entry, timing=TIMING_VERSION)):
        return None
    if version > TIMING_VERSION:
        return f"timing version {version}, newer than this gpuperf's {TIMING_VERSION}: upgrade pytest-gpuperf"
    changes = "; ".join(TIMING_CHANGES[v][1] for v in TIMING_CHANGES
                        if version < v <= TIMING_VERSION and _changed(v, entry))
    return f"timing version {version}, and this gpuperf measures with {TIMING_VERSION}: {changes}"
