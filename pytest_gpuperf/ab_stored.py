"""The stored baseline an A/B reads: the recordings of its graph-timed entries, whose spread pools
into their tests' (docs/gate.md, "Same-GPU A/B runs")."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .core.records import Entry, Measured, Method, Result
from .core.units import plural
from .store.baseline import BaselineError, alike, baseline_path, load


def is_graph_timed(record: Measured) -> bool:
    return record.method == Method.GRAPH.value


#: A stored entry's recordings pool into a graph-timed test's spread (`stored_spreads`) when it holds
#: this many or more (two degrees of freedom).
STORED_MIN_RECORDINGS = 3


def stored_spreads(directory: Path | None, device: dict | None, say: Callable[[str], None]) -> dict[str, Entry]:
    """Test id -> the graph-timed entries with STORED_MIN_RECORDINGS or more in this GPU's stored
    baseline (`directory/<key>.yaml`, the base revision's copy), whose recordings pool into the
    test's A/B spread. A graph-timed call moves between processes with where its few blocks land, as
    far on one machine as across machines, and a side's three rounds may all land alike
    (docs/gate.md). Event-timed entries are left out: across machines they spread with clocks and
    power, which both sides of an A/B share. {} without a baseline (said in one line); an unusable
    one is reported and left as it is."""
    key = (device or {}).get("key")
    if directory is None or not key:
        return {}
    path = baseline_path(directory, key)
    try:
        stored = load(path, key)
    except BaselineError as exc:
        say(f"gpuperf ab: {exc}; judged without its recordings")
        return {}
    if stored is None:
        say(f"gpuperf ab: no stored baseline {path} in the base revision: each test is judged from its rounds alone")
        return {}
    entries = {i: e for i, e in stored.entries.items()
               if is_graph_timed(e) and len(e.history or []) >= STORED_MIN_RECORDINGS}
    say(f"gpuperf ab: {plural(len(entries), 'graph-timed entry', 'graph-timed entries')} of {path} "
        f"{'holds' if len(entries) == 1 else 'hold'} {STORED_MIN_RECORDINGS} or more recordings; their spread pools "
        f"into their tests'")
    return entries


def stored_history(record: Result, entry: Entry | None) -> list[float]:
    """The stored recordings of the base's record of a test, where they were measured as this run
    measures it (graph-timed, same cache mode and timing): their spread pools into the test's."""
    usable = entry is not None and is_graph_timed(record) and alike(entry, record)
    return entry.history if usable else []
