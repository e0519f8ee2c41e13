"""Per-GPU YAML baselines: load, validate, merge and save atomically under a file lock.

One file per device model, ``<baseline dir>/<device key>.yaml``::

    schema_version: 3
    device: {key: ..., name: ..., capability: "9.0", sm_count: 132, memory_gib: 79.2, peaks: {...}}
    software: {torch: ..., triton: ..., cuda: ..., driver: ...}
    recorded_at: '2026-11-23T10:00:00Z'
    entries:
      <test node id>: {median_ms: ..., noise: ..., samples: ..., method: ..., cache: ..., timing: ...,
                       history: [...], ...}
    ...

``history`` holds the median of each of the test's recent recordings (at most
``core.noise.HISTORY_WINDOW``, oldest first), from which the gate learns the test's run-to-run
spread; ``median_ms`` is their center. ``peak_memory_history`` holds their peak memory where they
differ, and ``peak_memory_bytes`` is the largest. Schema 1 files (no history; ``drift``, the range of the medians
merged into an entry) are read as entries of one recording, their drift counting as one more
observation of the spread until the entry has recordings of its own (``core.noise.LEGACY_UNTIL``);
they are written back as schema 3.

A file cut short can still be valid YAML: a schema-3 file ends with YAML's document end line ``...``,
and every entry from schema 2 on holds REQUIRED_KEYS, which alone guard schema-2 files.

Reading uses PyYAML's safe loader; every problem with a file raises :class:`BaselineError` whose message
names the file, says what is wrong and how to fix it. A file that cannot be validated is never
overwritten: :func:`save` re-reads and validates the existing file under the lock before merging.
"""

from __future__ import annotations

import collections
import datetime as _dt
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from ..core import noise, records
from ..core.records import Entry, Measured
from ..core.counters import Counters, code_changed, merge_all
from ..core.files import atomic_write_text, file_mode, lock_file
from ..core.plain import plain
from ..core.units import plural
from ..core.verdict import medians, memory_peaks
from ..core.versions import timing_epoch, version_note, version_of

#: libyaml's parser where PyYAML was built with it: a suite's baseline (a few hundred KB) loads in
#: every pytest process, and the pure-Python parser takes several times longer.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SCHEMA_VERSION = 3
#: Schema versions this version reads (1: before the history window; 2: before the end line).
READABLE_SCHEMAS = (1, 2, 3)
#: The first schema whose files end with YAML's document end line, "...".
ENDED_SINCE = 3
#: Keys every entry holds from schema 2 on: without them an entry cannot be compared, and their
#: absence once read as "timing version 1" (core.versions.recorded_version).
REQUIRED_KEYS = ("median_ms", "method", "cache", "timing")

#: Keys kept per entry, in the YAML's order (a result's other keys, e.g. its samples, stay out).
ENTRY_KEYS = records.ENTRY_KEYS

#: Seconds to wait for another writer's lock before giving up with a clear message.
LOCK_TIMEOUT_S = 120.0

_FLOAT_KEYS = records.ENTRY_FLOAT_KEYS
_RATE_KEYS = records.ENTRY_RATE_KEYS  # scale with 1 / median
_INT_KEYS = records.ENTRY_INT_KEYS
_SIGNIFICANT_DIGITS = 6  # plenty for timings whose noise is >= 0.1%; keeps the YAML diff-friendly
#: Largest range of medians (largest / smallest - 1) that :func:`combine` takes for drift: merged
#: recordings are of the same code, but a factor of two or more is a broken recording.
MAX_DRIFT = 1.0


class BaselineError(Exception):
    """A baseline file that cannot be used. The message names the file, the problem and the fix."""


@dataclass
class Baseline:
    path: Path
    device: dict
    software: dict
    recorded_at: str
    entries: dict[str, Entry] = field(default_factory=dict)


def baseline_path(directory: Path, device_key: str) -> Path:
    """The baseline file of ``device_key`` under ``directory``."""
    return Path(directory) / f"{device_key}.yaml"


# ----------------------------------------------------------------------------------------------
# entries


def _round(x: float) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.{_SIGNIFICANT_DIGITS}g}")


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _rounded(x: float) -> float | None:
    return _round(x) if math.isfinite(x) else None


def _plain(value: Any) -> Any:
    """Plain YAML-safe values, floats rounded to _SIGNIFICANT_DIGITS."""
    return plain(value, _rounded, coerce=True)


def _timed(entry: Entry) -> Entry:
    """`entry` naming its timing version: one that names none was timed with version 1."""
    if entry.timing is None:
        entry.timing = 1
    return entry


def entry_from_result(result: Measured) -> Entry:
    """The part of a result (or entry) that is stored in the baseline, as plain rounded values (its YAML
    mapping, read back); one that names no timing version was timed with version 1."""
    stored = _plain(Entry.of(result).to_dict())
    for key in _INT_KEYS:
        if _is_number(stored.get(key)):
            stored[key] = int(round(stored[key]))
    return _timed(Entry.from_dict(stored))


def since_code_change(entries: list[Entry]) -> list[Entry]:
    """The recordings of one test (oldest first) from the last whose counters say the code changed
    (core.counters.code_changed, against the counts merged since the change before): the old code's
    medians and counts must not set the new code's center and allowed spread. Recordings without
    counters cannot tell, and continue the history they are in."""
    start, seen = 0, None
    for i, entry in enumerate(entries):
        counters = entry.counters
        if counters is None:
            continue
        if seen is not None and code_changed(seen, counters):
            start, seen = i, counters
        else:
            seen = counters if seen is None else seen.merged(counters)
    return entries[start:]


def merged_counters(entries: list[Entry]) -> Counters | None:
    """The counters of several recordings of one test, oldest first, as one history: those since
    the code last changed (`since_code_change`); smaller moves extend the allowed spread."""
    return merge_all([entry.counters for entry in since_code_change(entries)])


def _with_counters(entry: Entry, recordings: list[Entry]) -> Entry:
    """`entry` holding the merged counters of `recordings` (none: no counters)."""
    entry.counters = merged_counters(recordings)
    return entry


def _with_median(entry: Entry, median_ms: float) -> Entry:
    """A copy of `entry` moved to `median_ms`: times (and the CI) scale with it, rates inversely. The
    median is rounded as stored first, so that a center that rounds to the stored one leaves every
    field as it is (recentred on rounded medians, the rates' last digits crept at every merge)."""
    f = _round(median_ms) / entry.stats.median_ms
    out = replace(entry, stats=entry.stats.scaled(f))
    for key in _RATE_KEYS:
        if _is_number(getattr(out, key)):
            setattr(out, key, getattr(out, key) / f)
    raw_pct = records.raw_pct_of_peak(out)
    if raw_pct is not None:
        out.pct_of_peak, out.above_peak = records.of_peak(raw_pct / f)
    return entry_from_result(out)


def how_measured(entry: Measured) -> tuple[str, str]:
    """How an entry was measured: (timing method, cache mode); medians measured differently differ."""
    return str(entry.method or "unknown"), str(entry.cache or "unknown")


def with_history(newest: Entry, history: list[float], legacy_drift: float | None = None,
                 peaks: list[int] | None = None) -> Entry:
    """`newest` moved to the center of `history` (bounded to the window) and holding it, with a legacy
    drift while it still counts (core.noise.LEGACY_UNTIL), and the peak memory of each recording in
    `peaks` (bounded to the window too): one call's peak differs between processes (docs/gate.md), so
    the entry's peak is the largest of them and the gate judges a run against their range."""
    history = noise.window(history)
    entry = _with_median(newest, noise.center(history))
    peaks = noise.window(peaks or [])
    entry.peak_memory_history = None
    if peaks:
        entry.peak_memory_bytes = max(peaks)
        if len(set(peaks)) > 1:  # equal peaks say no more than one: the window drops a differing one as late
            entry.peak_memory_history = peaks
    entry.history = [_round(m) for m in history]
    entry.drift = _round(legacy_drift) if legacy_drift and len(history) < noise.LEGACY_UNTIL else None
    return entry


def alike(a: Measured, b: Measured) -> bool:
    """Were two entries measured alike (method, cache and timing version), so their medians compare?"""
    return how_measured(a) == how_measured(b) and timing_epoch(a) == timing_epoch(b)


def combine(recordings: list[tuple[str, Mapping[str, Measured]]],
            max_drift: float = MAX_DRIFT, restart: Sequence[str] = ()) -> tuple[dict[str, Entry], list[str]]:
    """Merge several recordings of one GPU model (label, test id -> entry or result), oldest first.

    Per test, the recordings measured the way most of them were (timing method and cache mode, a
    stored entry of the current timing counting as the recordings in its history; the newest way on
    a tie), and of the
    newest of those's timing version, are combined: their medians (a stored entry's whole history) make the entry's
    history, bounded to the window, and the entry moves to their center. Where they differ by more
    than `max_drift` (largest / smallest - 1) the test really changed between recordings, or one
    recording is broken: the newest entry is kept as it is. A test whose id contains one of `restart`
    (a change the counters cannot see, such as a faster kernel of the same work) keeps only the
    recordings after the first, where there are any. Records that are not valid entries are left
    out. Returns (entries, notes): a note for each test not combined as a whole."""
    ids = sorted({name for _, entries in recordings for name in entries})
    out: dict[str, Entry] = {}
    notes: list[str] = []
    older_versions: list[str] = []
    for name in ids:
        recs, later = [], []
        for index, (label, entries) in enumerate(recordings):
            if name not in entries:
                continue
            entry = entry_from_result(entries[name])
            problem = _problem(entry)
            if problem:
                notes.append(f"{name}: left out of {label}: {problem}")
            else:
                recs.append((label, entry))
                later.append(index > 0)
        if not recs:
            continue
        if any(text in name for text in restart) and any(later):
            notes.append(f"{name}: its history starts again (--restart)")
            recs = [rec for rec, is_later in zip(recs, later) if is_later]
        if len(changed := since_code_change([e for _, e in recs])) < len(recs):
            notes.append(f"{name}: the counters say the code changed: its history starts again")
            recs = recs[len(recs) - len(changed):]
        # the way most recordings measured it (the newest way on a tie): a gate run prefers that method.
        # A stored entry of this gpuperf's timing counts once per median in its history, an outdated one once.
        counts = collections.Counter()
        for _, e in recs:
            counts[how_measured(e)] += len(medians(e)) if version_note(e) is None else 1
        how = max(reversed([how_measured(e) for _, e in recs]), key=lambda h: counts[h])
        label, newest = next((lb, e) for lb, e in reversed(recs) if how_measured(e) == how)
        same_how = [e for _, e in recs if how_measured(e) == how]
        if len(same_how) < len(recs):
            others = sorted({"/".join(how_measured(e)) for _, e in recs if how_measured(e) != how})
            notes.append(f"{name}: measured {', '.join(others)} (method/cache) in some recordings and "
                         f"{'/'.join(how)} in most: only the {'/'.join(how)} ones are combined")
        same = [e for e in same_how if alike(e, newest)]
        if len(same) < len(same_how):
            older_versions.append(name)
        history = noise.window([m for e in same for m in medians(e)])
        spread = max(history) / min(history) - 1.0
        if spread > max_drift:
            notes.append(f"{name}: medians {', '.join(f'{m:.4g}' for m in history)} ms differ by "
                         f"{spread:.0%}, more than {max_drift:.0%}: kept {label}'s entry as it is (a real "
                         f"change, or a broken recording)")
            out[name] = newest
            continue
        legacy = max((e.drift for e in same_how if _is_number(e.drift)), default=None)
        out[name] = _with_counters(with_history(newest, history, legacy, [p for e in same for p in memory_peaks(e)]),
                                   [e for _, e in recs])
    if older_versions:
        were = "was" if len(older_versions) == 1 else "were"
        notes.append(f"{plural(len(older_versions), 'test')} (e.g. {older_versions[0]}) {were} also recorded with "
                     f"an older timing version: only the newest version's medians are combined")
    return out, notes


def _problem(entry: Entry) -> str | None:
    """What is wrong with an entry about to be stored (an unset required field counts as absent)."""
    return _entry_problem({k: v for k, v in entry.to_dict().items() if v is not None or k not in REQUIRED_KEYS})


def _entry_problem(entry: Any, required: tuple[str, ...] = REQUIRED_KEYS) -> str | None:
    """What is wrong with one stored entry, or None. `required`: the keys it must hold (a schema-1
    entry needs only a median)."""
    if not isinstance(entry, dict):
        return f"is a {type(entry).__name__}, not a mapping of measurements"
    median = entry.get("median_ms")
    if not _is_number(median) or not math.isfinite(median) or median <= 0:
        return f"median_ms must be a positive number, got {median!r}"
    missing = [key for key in required if key not in entry]
    if missing:
        return f"has no {', '.join(missing)}, which every entry holds (how it was measured, and its timing version)"
    for key in _FLOAT_KEYS + _INT_KEYS:
        if key in entry and entry[key] is not None:
            value = entry[key]
            if not _is_number(value) or not math.isfinite(value) or value < 0:
                return f"{key} must be a non-negative number or null, got {value!r}"
    peak = entry.get("peak")
    if peak is not None and not isinstance(peak, str):
        return f"peak must be the name of a measured peak (copy_gbps, bf16_tflops, ...) or null, got {peak!r}"
    throttle = entry.get("throttle")
    if throttle is not None and not (isinstance(throttle, list) and all(isinstance(t, str) for t in throttle)):
        return f"throttle must be a list of NVML clock-event reasons (sw_power_cap, ...) or null, got {throttle!r}"
    if entry.get("loaded") not in (None, True, False):
        return f"loaded must be true, false or absent, got {entry['loaded']!r}"
    if "timing" in entry and version_of(entry["timing"]) is None:
        return f"timing must be a timing version (a positive integer), got {entry['timing']!r}"
    samples = entry.get("samples")
    if samples is not None and samples < 1:
        return f"samples must be >= 1, got {samples!r}"
    history = entry.get("history")
    if history is not None and not (isinstance(history, list) and history and all(
            _is_number(v) and math.isfinite(v) and v > 0 for v in history)):
        return f"history must be a list of positive medians in ms, got {history!r}"
    peaks = entry.get("peak_memory_history")
    if peaks is not None and not (isinstance(peaks, list) and peaks and all(
            _is_number(v) and math.isfinite(v) and v >= 0 for v in peaks)):
        return f"peak_memory_history must be a list of peak memory bytes, got {peaks!r}"
    try:
        Counters.from_dict(entry.get("counters"))
    except ValueError as exc:
        return str(exc)
    ci = entry.get("ci_ms")
    if ci is not None:
        if not (isinstance(ci, list) and len(ci) == 2 and all(_is_number(v) and math.isfinite(v) for v in ci)
                and ci[0] <= ci[1]):
            return f"ci_ms must be [low, high] in ms, got {ci!r}"
    return None


# ----------------------------------------------------------------------------------------------
# reading


def _fmt_time(value: Any) -> str:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat(timespec="seconds") + "Z"
    return "" if value is None else str(value)


def _validate(path: Path, data: Any, device_key: str | None, ended: bool = True) -> Baseline:
    """The baseline in `data`, read from `path`; `ended`: its text ends with the end line."""
    fix_regen = (
        "fix it by hand, restore it from version control (git checkout -- FILE), "
        "or delete it and re-record with `pytest --gpuperf --gpuperf-save`"
    ).replace("FILE", str(path))
    if data is None:
        raise BaselineError(f"{path}: the baseline file is empty; {fix_regen}")
    if not isinstance(data, dict):
        raise BaselineError(
            f"{path}: not a gpuperf baseline (top level is a {type(data).__name__}, expected a mapping "
            f"with schema_version, device and entries); {fix_regen}"
        )
    version = data.get("schema_version")
    if version is None:
        raise BaselineError(f"{path}: no schema_version, so this is not a gpuperf baseline file; {fix_regen}")
    if isinstance(version, bool) or version not in READABLE_SCHEMAS:
        raise BaselineError(
            f"{path}: schema_version {version!r} is not supported (this pytest-gpuperf reads versions "
            f"{', '.join(map(str, READABLE_SCHEMAS))}); re-record it with this version (`pytest --gpuperf --gpuperf-save` after "
            f"deleting the file) or use the pytest-gpuperf version that wrote it"
        )
    if version >= ENDED_SINCE and not ended:
        raise BaselineError(
            f"{path}: cut short: a schema-{version} baseline ends with the line '...', which this file lacks, so "
            f"entries may be missing or partial; restore it from version control (git checkout -- {path}), "
            f"re-record it with `pytest --gpuperf --gpuperf-save` after deleting it, or, if a YAML tool rewrote "
            f"it whole, add '...' as its last line")
    device = data.get("device")
    if not isinstance(device, dict) or not isinstance(device.get("key"), str) or not device.get("key"):
        raise BaselineError(f"{path}: 'device' must be a mapping with a 'key' string; {fix_regen}")
    if device_key is not None and device["key"] != device_key:
        raise BaselineError(
            f"{path}: this baseline is for device {device['key']!r}, but this machine's device is "
            f"{device_key!r}; a baseline is only valid on the GPU model it was recorded on. Rename or "
            f"move the file, or point --gpuperf-baseline-dir at the right directory "
            f"(this device's file is {path.parent / (device_key + '.yaml')})"
        )
    software = data.get("software")
    if software is None:
        software = {}
    if not isinstance(software, dict):
        raise BaselineError(f"{path}: 'software' must be a mapping; {fix_regen}")
    if version >= 2 and "entries" not in data:  # the writer writes it, if empty as {}: the file was cut short
        raise BaselineError(f"{path}: no 'entries' (a file cut short?); {fix_regen}")
    entries = data.get("entries")
    if entries is None:
        entries = {}
    if not isinstance(entries, dict):
        raise BaselineError(f"{path}: 'entries' must be a mapping of test id -> measurements; {fix_regen}")
    required = REQUIRED_KEYS if version >= 2 else ("median_ms",)
    for name, entry in entries.items():
        missing = [key for key in required if isinstance(entry, dict) and key not in entry]
        if missing and "median_ms" not in missing:  # the writer always writes them: the file lost its end
            raise BaselineError(
                f"{path}: entry {name!r} has no {', '.join(missing)}, which every entry of a schema-{version} "
                f"baseline holds: the file was cut short or edited by hand; restore it from version control "
                f"(git checkout -- {path}) or re-record the test")
        problem = _entry_problem(entry, required)
        if problem:
            raise BaselineError(f"{path}: entry {name!r}: {problem}; {fix_regen}")
    return Baseline(
        path=path,
        device=device,
        software=software,
        recorded_at=_fmt_time(data.get("recorded_at")),
        entries={str(k): _timed(Entry.from_dict(v)) for k, v in entries.items()},  # schema 1: timing 1
    )


def _read(path: Path, device_key: str | None) -> Baseline | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise BaselineError(f"{path}: is a directory, not a baseline file; remove it or choose another path") from None
    except OSError as exc:
        raise BaselineError(
            f"{path}: cannot read the baseline file ({exc.strerror or exc}); check its permissions"
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BaselineError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}), so not a gpuperf baseline; restore it "
            f"from version control or delete it and re-record with `pytest --gpuperf --gpuperf-save`"
        ) from None
    try:
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise BaselineError(
            f"{path}: corrupt YAML{where} ({problem}); restore it from version control "
            f"(git checkout -- {path}) or delete it and re-record with `pytest --gpuperf --gpuperf-save`"
        ) from None
    return _validate(path, data, device_key, ended=("\n" + text.rstrip()).endswith("\n..."))


def load(path: Path, device_key: str | None = None) -> Baseline | None:
    """Read and validate a baseline. None if the file does not exist; BaselineError if it is unusable
    (unreadable, corrupt YAML, not a mapping, wrong schema_version, another device's file, a bad entry)."""
    return _read(Path(path), device_key)


# ----------------------------------------------------------------------------------------------
# writing


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


def _dump(device: dict, software: dict, recorded_at: str, entries: dict[str, Entry]) -> str:
    doc = {
        "schema_version": SCHEMA_VERSION,
        "device": _plain(device),
        "software": _plain(software or {}),
        "recorded_at": recorded_at,
        "entries": {k: _plain(entries[k].to_dict()) for k in sorted(entries)},
    }
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True, width=200,
                          explicit_end=True)


def save(path: Path, device: dict, software: dict, entries: Mapping[str, Measured], *,
         keep_others: bool = True) -> Baseline:
    """Merge ``entries`` (test id -> entry or result) into the baseline at ``path`` and write it atomically.

    Under a file lock (:func:`lock_file`): re-read and validate the existing file (a corrupt or foreign
    file raises BaselineError and is left untouched), keep the entries that were not run and replace
    the ones that were (a re-recorded entry measured alike adds its median to the entry's history)
    -- or, with `keep_others` False, hold exactly `entries` --, update
    device/software/recorded_at, write to a temporary file in the same directory and ``os.replace``
    it over the old one. Safe for concurrent writers (threads, processes, pytest-xdist workers)."""
    from filelock import FileLock, Timeout

    path = Path(path)
    if not isinstance(device, dict) or not device.get("key"):
        raise BaselineError(f"{path}: cannot save: the device has no key ({device!r})")
    entries = {str(name): entry_from_result(entry) for name, entry in entries.items()}
    for name, entry in entries.items():
        problem = _problem(entry)
        if problem:
            raise BaselineError(f"{path}: cannot save entry {name!r}: {problem}")
    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BaselineError(
            f"{path}: cannot create the baseline directory {directory} ({exc.strerror or exc}); create it "
            f"yourself or choose a writable one with --gpuperf-baseline-dir"
        ) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise BaselineError(
            f"{path}: the baseline directory {directory} is not writable; make it writable "
            f"(chmod u+w {directory}) or choose another one with --gpuperf-baseline-dir"
        )
    try:
        lock_path = lock_file(path)
        with FileLock(str(lock_path), timeout=LOCK_TIMEOUT_S, poll_interval=0.01):
            old = _read(path, device["key"])
            previous = old.entries if old is not None else {}
            if keep_others:  # a recording adds its median to the history of an entry measured alike
                for name, entry in entries.items():
                    before = previous.get(name)
                    # the old code's entry (its counters say the code changed) starts no history, as in combine
                    older = before if before and len(since_code_change([before, entry])) == 2 else None
                    continued = [older] if older and alike(older, entry) else []  # the recordings it extends
                    history = [m for e in continued + [entry] for m in medians(e)]
                    # a legacy drift is a relative spread, which a new timing version leaves as it was
                    legacy = entry.drift or (older.drift if older and how_measured(older) == how_measured(entry) else None)
                    peaks = [p for e in continued + [entry] for p in memory_peaks(e)]
                    # counters do not depend on how time was measured: every earlier recording counts
                    entries[name] = _with_counters(with_history(entry, history, legacy, peaks),
                                                   [before, entry] if before else [entry])
            merged = dict(previous) if keep_others else {}
            merged.update(entries)
            for name, entry in merged.items():  # a schema-1 entry kept as it was may lack a required key
                problem = _problem(entry)
                if problem:
                    raise BaselineError(f"{path}: cannot rewrite entry {name!r} as schema {SCHEMA_VERSION}: {problem}; "
                                        f"re-record the test or delete its entry")
            recorded_at = _utc_now()
            text = _dump(device, software, recorded_at, merged)
            atomic_write_text(path, text, file_mode(path))
    except Timeout:
        raise BaselineError(
            f"{path}: timed out after {LOCK_TIMEOUT_S:.0f} s waiting for the lock {lock_path}; if no other "
            f"pytest run is saving baselines, delete the lock file"
        ) from None
    except OSError as exc:
        raise BaselineError(
            f"{path}: cannot write the baseline ({exc.strerror or exc}); make {directory} writable or choose "
            f"another directory with --gpuperf-baseline-dir"
        ) from None
    return Baseline(path=path, device=_plain(device), software=_plain(software or {}),
                    recorded_at=recorded_at, entries={k: merged[k] for k in sorted(merged)})
