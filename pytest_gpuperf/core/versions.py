"""Timing versions: what a sample measures, recorded with each result, so that results timed
differently are never compared as if they were timed alike."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

from .records import CacheMode, Measured, Method


class TimingChange(NamedTuple):
    """What one timing version changed: the methods, and the cache modes (None: all), whose samples it moved."""

    methods: tuple[str, ...]
    text: str
    caches: tuple[str, ...] | None = None


#: The version this gpuperf measures with. A change names the methods (and cache modes) whose
#: samples it moved; results of the others compare across it.
TIMING_VERSION = 7
CUDA_METHODS = (Method.EVENTS.value, Method.GRAPH.value, Method.QUEUED.value, Method.DEVICE_SYNC.value)
TIMING_CHANGES = {
    2: TimingChange(
        CUDA_METHODS,
        "CUDA event samples no longer include the ~1 µs latency of a kernel launched between two "
        "events (they read the call as it runs in a stream, as graph replays do)"),
    3: TimingChange(
        CUDA_METHODS,
        "CUDA event samples no longer include the ~1 µs gap between two kernels queued eagerly (they read the "
        "call as a graph replay does: up to ~1.5 µs less per sample on an H100), and graphs hold at most 50 "
        "calls (a GPU can space the kernels of longer graphs out: a 1 µs kernel read up to 25% less)"),
    4: TimingChange(
        (Method.EVENTS.value, Method.GRAPH.value, Method.QUEUED.value),
        "samples no longer include the gap a GPU leaves after a call's last kernel before the next kernel starts "
        "(measured per GPU with CUPTI: 0.1-0.4 µs per call on an H100); a call reads as a profiler's kernel time"),
    5: TimingChange(
        CUDA_METHODS,
        "with a cold L2, a call whose inputs and allocations exceed the L2 is no longer sampled behind a flush but "
        "back to back: each sample pays for the lines the call before it left dirty, as a call in a loop does "
        "(a flushed sample never wrote them back: memory-bound calls read up to 15% faster than a profiler's "
        "steady state on an H100)",
        (CacheMode.COLD.value,)),
    6: TimingChange(
        (Method.GRAPH.value, Method.QUEUED.value),
        "the graph node gap is subtracted once per sample, not once per call: kernels replayed back to back in a "
        "graph leave no gap between them (their time per call is CUPTI's duration), so a short call read 0.16-0.45 "
        "µs below a profiler's steady state on H100s and H200s"),
    7: TimingChange(
        (Method.GRAPH.value,),
        "test collection runs on the session's stream too: large kernels launched at collection on another "
        "stream (such as a conftest's dry run of the tests) left every graph node the tests later replayed "
        "~0.17 µs longer, so a call of one kernel read ~0.35 µs high on an H100"),
}


def version_of(value: Any) -> int | None:
    """A stored timing version: a positive integer (or its digits as a string); None for anything else."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def recorded_version(entry: Measured) -> int | None:
    """The timing version an entry or result was measured with: 1 when it records none (measured
    before versions were recorded); None when it is not a version (version_of)."""
    return version_of(1 if entry.timing is None else entry.timing)


def _changed(version: int, entry: Measured) -> bool:
    """Whether timing version `version` moved the samples of an entry's method (assumed so for an
    entry that does not say how it was timed)."""
    change, method, cache = TIMING_CHANGES[version], entry.method, entry.cache
    return (not method or method in change.methods) and (not cache or change.caches is None or cache in change.caches)


def timing_epoch(entry: Measured) -> int | None:
    """The newest timing version, up to the entry's own, that changed how its method reads (1 when
    none did): two results were measured the same way when their epochs are equal. A version newer
    than this gpuperf's is its own epoch; None: not a version."""
    version = recorded_version(entry)
    if version is None or version > TIMING_VERSION:
        return version
    return max([1] + [v for v in TIMING_CHANGES if v <= version and _changed(v, entry)])


def version_note(entry: Measured) -> str | None:
    """What differs between an entry's timing and this gpuperf's for its method, or None."""
    version = recorded_version(entry)
    if version is None:
        return f"an unknown timing version (this gpuperf measures with {TIMING_VERSION})"
    if timing_epoch(entry) == timing_epoch(replace(entry, timing=TIMING_VERSION)):
        return None
    if version > TIMING_VERSION:
        return f"timing version {version}, newer than this gpuperf's {TIMING_VERSION}: upgrade pytest-gpuperf"
    changes = "; ".join(TIMING_CHANGES[v].text for v in TIMING_CHANGES
                        if version < v <= TIMING_VERSION and _changed(v, entry))
    return f"timing version {version}, and this gpuperf measures with {TIMING_VERSION}: {changes}"
