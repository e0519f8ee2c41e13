"""Hardware counters of one measured call, and the counter gate that judges them beside time.

A call's counters (summed over its kernels: instructions executed, DRAM bytes, L2 bytes, launches)
do not depend on clocks, power or the host, so they decide what timing cannot see: a small kernel
that does more work, or a slowdown with the same work (the machine, not the code). Each side of a
comparison holds, per counter, one value per recording (a baseline entry's recent recordings, or one
run's single value); a counter's allowed spread is learned from those values, with a floor of its
own (docs/counters.md gives the spreads measured on H100 and H200).
"""
from __future__ import annotations

import statistics
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .noise import HISTORY_WINDOW
from .units import as_number, fmt_bytes, fmt_change


@dataclass(frozen=True)
class CounterSpec:
    """One counter: its stored name, what it is called in a message, and the change that unchanged
    code never shows (relative, and absolute in the counter's own unit)."""

    name: str
    label: str
    floor: float
    abs_floor: float
    judged: bool  # more of it is a regression; otherwise it only explains a verdict


#: The counters, in the YAML's order. Instructions repeat for one kernel; DRAM reads move with what
#: the L2 still held, writes with what it kept at the end (docs/counters.md gives the spreads).
SPECS = (
    CounterSpec("instructions", "instructions", 0.005, 64, True),
    CounterSpec("dram_read_bytes", "DRAM read", 0.05, 64 * 1024, True),
    CounterSpec("dram_write_bytes", "DRAM written", 0.10, 1 << 20, True),
    CounterSpec("l2_bytes", "L2 traffic", 0.10, 1 << 20, False),
    CounterSpec("tensor_instructions", "tensor-pipe instructions", 0.005, 64, False),
    CounterSpec("launches", "kernel launches", 0.0, 0.5, True),
)
SPEC = {s.name: s for s in SPECS}
#: Achieved occupancy (% of the SM's warp slots, duration-weighted over the call's kernels): shown,
#: stored, never judged (it moves with the work's placement).
OCCUPANCY = "occupancy_pct"
#: A fingerprint of the set of kernel names a call ran (CRC-32): where it differs from every stored
#: one, autotuning or dispatch chose other kernels, whose counts say nothing about the code.
KERNEL_SET = "kernel_set"
#: An instruction change past this share, or another launch count, is a change of the code: a
#: recording that shows one starts its test's counter history anew (smaller moves extend it, so
#: the history learns a noisy counter's spread).
CODE_CHANGE = 0.02
#: How many times a side's own spread (largest / smallest - 1 of its recordings) a change must exceed.
SPREAD_FACTOR = 2.0
#: A counter whose recordings on either side differ by more than VARYING_SPREAD and VARYING_ABS
#: counts work that depends on scheduling (split-row programs that wait on each other, cuDNN's
#: attention kernels): it is held to at least VARYING_FLOOR, and only a larger instruction change is a
#: code change. Deterministic kernels' instructions moved by at most 3 between processes; the varying
#: ones by up to 2.1% (docs/counters.md). Either side may show it: a baseline counted once per call
#: has no spread of its own.
VARYING_SPREAD = 1e-4
VARYING_ABS = 8
VARYING_FLOOR = 0.05

MORE, LESS, SAME, OTHER = "more", "less", "same", "other"
#: How many times the DRAM bytes a call's kernels moved its declared `bytes=` may exceed before its
#: GB/s and % of peak are called overstated; judged only where the declaration exceeds L2_SHARE times
#: the L2 (smaller working sets partly stay in it). Moving more than declared is the usual reading of
#: `bytes=` (the least the operation must move: an unfused implementation shows as a low rate).
DECLARED_FACTOR = 2.0
L2_SHARE = 2.0


@dataclass(frozen=True)
class Counters:
    """Per counter, its value in each recording, oldest first (one value for one run)."""

    values: Mapping[str, tuple[float, ...]]

    @classmethod
    def from_dict(cls, data: Any) -> "Counters | None":
        """Counters from a stored mapping (counter -> number or list of numbers); None when there are
        none, and counters as they are. ValueError names the first bad counter."""
        if data is None or isinstance(data, Counters):
            return data
        if not isinstance(data, Mapping):
            raise ValueError(f"counters must be a mapping of counter name -> values, got {data!r}")
        out: dict[str, tuple[float, ...]] = {}
        for name, raw in data.items():
            seq = raw if isinstance(raw, (list, tuple)) else [raw]
            numbers = [as_number(v) for v in seq]
            if not seq or any(v is None or v < 0 for v in numbers):
                raise ValueError(f"counter {name!r} must be a non-negative number or a list of them, got {raw!r}")
            out[str(name)] = tuple(float(v) for v in numbers)
        return cls(out) if out else None

    def to_dict(self) -> dict[str, list[float | int]]:
        """The stored mapping: whole numbers as ints (counts and bytes), known counters first."""
        order = [s.name for s in SPECS if s.name in self.values] + sorted(set(self.values) - set(SPEC))
        return {name: [int(v) if float(v).is_integer() else round(v, 3) for v in self.values[name]]
                for name in order}

    def center(self, name: str) -> float | None:
        """The counter's typical value: the median of its recordings."""
        values = self.values.get(name)
        return statistics.median(values) if values else None

    def spread(self, name: str) -> float:
        """Largest / smallest - 1 of the counter's recordings (0 for one, or for zeros)."""
        values = self.values.get(name) or ()
        low = min(values, default=0.0)
        return max(values) / low - 1.0 if low > 0 else 0.0

    def merged(self, newer: "Counters | None") -> "Counters":
        """These recordings followed by `newer`'s, each counter bounded to the history window."""
        if newer is None:
            return self
        names = list(self.values) + [n for n in newer.values if n not in self.values]
        return Counters({n: tuple([*self.values.get(n, ()), *newer.values.get(n, ())][-HISTORY_WINDOW:])
                         for n in names})


def code_changed(old: Counters, new: Counters) -> bool:
    """Do `new`'s counts say the code changed since `old`'s (other kernels, other launches, or
    instructions beyond CODE_CHANGE)?"""
    if _other_kernels(old, new):
        return True
    varying = _varying(old, new, "instructions")
    for name, share in (("launches", 0.0), ("instructions", VARYING_FLOOR if varying else CODE_CHANGE)):
        b, n = old.center(name), new.center(name)
        if b is not None and n is not None and abs(n - b) > share * b:
            return True
    return False


def _other_kernels(base: Counters, now: Counters) -> bool:
    """Did `now` run a set of kernels none of `base`'s recordings ran?"""
    b, n = base.values.get(KERNEL_SET), now.values.get(KERNEL_SET)
    return bool(b and n and not set(b) & set(n))


def merge_all(sides: Sequence[Counters | None]) -> Counters | None:
    """Several recordings' counters as one, oldest first; None if none has any."""
    out: Counters | None = None
    for counters in sides:
        if counters is not None:
            out = counters if out is None else out.merged(counters)
    return out


@dataclass(frozen=True)
class CounterVerdict:
    """The counters' judgement of one test: `more` (more work than the recordings allow), `less`,
    `same`, or None where a side has no counters; `changes` holds each counter's relative change
    (None where the base was 0), `moved` the counters beyond their allowed spread."""

    verdict: str | None
    changes: Mapping[str, float | None]
    moved: tuple[str, ...]
    message: str


def _varying(base: Counters, now: Counters, name: str) -> bool:
    """Do the recordings of either side show that this counter varies from call to call?"""
    def varies(side: Counters) -> bool:
        values = side.values.get(name) or ()
        return side.spread(name) > VARYING_SPREAD and max(values) - min(values) > VARYING_ABS

    return varies(base) or varies(now)


def _allowed(spec: CounterSpec, base: Counters, now: Counters, center: float) -> float:
    """The absolute change of one counter that the recordings' own spread and its floor allow."""
    learned = SPREAD_FACTOR * max(base.spread(spec.name), now.spread(spec.name))
    floor = max(spec.floor, VARYING_FLOOR) if _varying(base, now, spec.name) else spec.floor
    return max(spec.abs_floor, center * max(floor, learned))


def judge_counters(base: Counters | None, now: Counters | None) -> CounterVerdict:
    """Judge this run's counters against the stored ones. A judged counter beyond its allowed spread
    upward makes the verdict `more`; only downward ones, `less`."""
    if base is None or now is None:
        return CounterVerdict(None, {}, (), "")
    if _other_kernels(base, now):
        return CounterVerdict(OTHER, {}, (), "other kernels ran than in the recordings (autotuning or dispatch "
                                             "chose differently), so their counts are not compared")
    changes: dict[str, float | None] = {}
    up: list[str] = []
    down: list[str] = []
    for spec in SPECS:
        b, n = base.center(spec.name), now.center(spec.name)
        if b is None or n is None:
            continue
        changes[spec.name] = n / b - 1.0 if b > 0 else None
        if abs(n - b) > _allowed(spec, base, now, b):
            (up if n > b else down).append(spec.name)
    judged_up = [name for name in up if SPEC[name].judged]
    verdict = MORE if judged_up else LESS if any(SPEC[n].judged for n in down) else SAME
    moved = tuple(up + down)
    return CounterVerdict(verdict, changes, moved, describe(base, now, changes, moved))


def _fmt_count(spec: CounterSpec, value: float) -> str:
    return fmt_bytes(value) if spec.name.endswith("_bytes") else f"{value:,.0f}"


def _moved_text(name: str, base: Counters, now: Counters, change: float | None) -> str:
    spec = SPEC[name]
    b, n = base.center(name), now.center(name)
    shown = fmt_change(change) if change is not None else f"{_fmt_count(spec, b)} -> {_fmt_count(spec, n)}"
    return f"{spec.label} {shown}"


def describe(base: Counters, now: Counters, changes: Mapping[str, float | None], moved: Sequence[str]) -> str:
    """'instructions +12.5%, DRAM read +50.0%', or 'same instructions and DRAM bytes' (and what else
    moved: 'same instructions and DRAM bytes; L2 traffic +20.0%')."""
    judged = [n for n in moved if SPEC[n].judged]
    if judged:
        return ", ".join(_moved_text(name, base, now, changes.get(name)) for name in moved)
    held = [SPEC[n].label for n in ("instructions", "dram_read_bytes") if n in changes]
    text = ("same " + " and ".join("DRAM bytes" if h == "DRAM read" else h for h in held)) if held \
        else "no counters in common"
    return text + "".join(f"; {_moved_text(name, base, now, changes.get(name))}" for name in moved)


def declared_bytes_note(declared: int | None, counters: "Counters | None", l2_bytes: int | None) -> str | None:
    """A line where a call's declared bytes exceed DECLARED_FACTOR times the DRAM bytes its kernels
    read and wrote (its GB/s and % of peak are then overstated); None otherwise."""
    if not declared or counters is None or not l2_bytes or declared < L2_SHARE * l2_bytes:
        return None
    read, written = counters.center("dram_read_bytes"), counters.center("dram_write_bytes")
    if read is None or written is None:
        return None
    moved = read + written
    if declared <= DECLARED_FACTOR * moved:
        return None
    return (f"declared bytes={declared:,} but its kernels read and wrote {moved:,.0f} DRAM bytes: its GB/s and "
            f"% of peak are {declared / moved:.1f}x too high; declare what the operation must move")


def with_declared_note(warnings: Sequence[str], declared: int | None, counters: "Counters | None",
                       l2_bytes: int | None) -> list[str]:
    """`warnings`, and `declared_bytes_note`'s line where it has one and they lack it."""
    note = declared_bytes_note(declared, counters, l2_bytes)
    return [*warnings, note] if note and note not in warnings else list(warnings)


def summed(kernels: Sequence[Mapping[str, Any]]) -> Counters:
    """One call's counters from its kernels' rows (counter -> value per kernel, and its `name`):
    sums, the launch count, occupancy weighted by each kernel's duration (`duration_ns`), and the
    fingerprint of the set of kernel names."""
    totals: dict[str, float] = {s.name: 0.0 for s in SPECS if s.name != "launches"}
    weight = occupied = 0.0
    for row in kernels:
        for name in totals:
            totals[name] += float(row.get(name) or 0.0)
        duration = float(row.get("duration_ns") or 0.0)
        if OCCUPANCY in row and row[OCCUPANCY] is not None:
            weight += duration
            occupied += duration * float(row[OCCUPANCY])
    totals["launches"] = float(len(kernels))
    if weight > 0:
        totals[OCCUPANCY] = round(occupied / weight, 2)
    names = sorted({str(row["name"]) for row in kernels if row.get("name")})
    if names:
        totals[KERNEL_SET] = float(zlib.crc32("\n".join(names).encode()))
    return Counters({name: (value,) for name, value in totals.items()})
