"""The records every layer passes around: one measured result (what was measured, its statistics and
the gate's judgement, as torch.utils.benchmark keeps a TaskSpec apart from its Measurement), one stored
baseline entry.

Records cross process boundaries (pytest-xdist's user_properties, YAML, JSON) as plain dicts; these
dataclasses are the one definition of their keys and types, converted at those edges.
"""
from __future__ import annotations

import enum
import math
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any

from .counters import Counters


#: NVML clock-event reasons of a thermal or hardware slowdown: the GPU, not the load, held the clocks
#: down. A power cap under a heavy matmul is the card working as designed, so it is not one of them.
SEVERE_THROTTLE = frozenset({"hw_slowdown", "hw_thermal", "sw_thermal", "hw_power_brake"})


class CacheMode(enum.Enum):
    """The L2's state when a sample starts."""

    COLD = "cold"  # flushed before each sample
    WARM = "warm"  # left as the previous sample left it


class Method(enum.Enum):
    """How a result's samples were taken."""

    EVENTS = "events"  # CUDA events around each call
    GRAPH = "graph"  # CUDA events around a graph replay of several calls
    QUEUED = "queued"  # several eager calls queued behind a GPU spin (capture failed)
    DEVICE_SYNC = "device-sync"  # events plus a device-wide synchronize (work on other streams)
    CPU = "cpu"  # host clock, no CUDA in use
    HOST_SYNC = "host-sync"  # host clock around a device synchronize (CUDA work, no CUDA tensors seen)


class Phase(enum.Enum):
    """Where a measurement's wall time goes after its first call (`first_call_s`): Result.phases."""

    WARMUP = "warm-up"
    POWER_CAP = "power cap"  # the longer warm-up of a call the cap holds down
    CALIBRATION = "calibration"  # what no other phase claims: pending work, peak memory, frame, capture
    SETTLING = "settling"  # the uncounted batch ahead of a loaded call's samples, or after a restart
    SAMPLES = "samples"  # batches of samples, the host's reading of them included
    RESTART = "restart"  # samples dropped when the cap engaged while sampling


def _json(position: int, **meta: Any) -> dict:
    """Field metadata: the key is written to pytest-benchmark's extra_info, at this position."""
    return {"json": position, **meta}


#: Field metadata of a statistic a baseline entry stores.
_IN_ENTRY = {"entry": True}


@dataclass(frozen=True)
class Interval:
    """The 95% confidence interval of a median, in ms. One sample bounds no interval: its interval is
    unbounded (-inf, inf), and the gate reads that side's sampling error as unknown."""

    low: float
    high: float

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def half_width(self) -> float:
        """Half the interval's width (inf where unbounded)."""
        return math.inf if not self.bounded else (self.high - self.low) / 2.0

    def scaled(self, factor: float) -> "Interval":
        """The interval of a median `factor` times this one's."""
        return Interval(self.low * factor, self.high * factor)

    def to_list(self) -> list[float]:
        return [self.low, self.high]

    @classmethod
    def of(cls, value: Any, samples: Any = None) -> "Interval | None":
        """The interval a record stores as [low, high]: a pair with a null or infinite end, or none at
        all in a record of one sample, is unbounded (the files hold it so); None where the record
        names no usable interval (absent, not a pair of numbers, low above high)."""
        if isinstance(value, Interval):
            return value
        if value is None:
            return UNBOUNDED if samples == 1 else None
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            return None
        if None in value:  # how JSON and YAML hold an infinite end
            return UNBOUNDED
        ends = [float(v) for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(ends) != 2 or any(math.isnan(v) for v in ends) or ends[0] > ends[1]:
            return None
        interval = cls(*ends)
        return interval if interval.bounded else UNBOUNDED


#: The interval of a median of one sample.
UNBOUNDED = Interval(-math.inf, math.inf)


@dataclass(frozen=True)
class Statistics:
    """A median and the spread of the samples behind it, in ms per call (torch.utils.benchmark's
    Measurement, its raw times included): built from the samples by measure.stats.summarize, or read
    back from a file's keys. `noise` is relative (1.4826 MAD / median); `ci_ms` the median's 95%
    interval, UNBOUNDED for one sample, None where a file names none. A baseline entry keeps the
    statistics marked stored (`stored`), in this order."""

    median_ms: float = field(metadata=_IN_ENTRY)
    mean_ms: float | None = field(default=None, metadata=_IN_ENTRY)
    min_ms: float | None = field(default=None, metadata=_IN_ENTRY)
    max_ms: float | None = None
    stddev_ms: float | None = field(default=None, metadata=_IN_ENTRY)
    q1_ms: float | None = None
    q3_ms: float | None = None
    noise: float | None = field(default=None, metadata=_json(7, **_IN_ENTRY))
    ci_ms: Interval | None = field(default=None, metadata=_json(8, **_IN_ENTRY))
    samples: int | None = field(default=None, metadata=_IN_ENTRY)
    data: tuple[float, ...] = ()  # the samples, in the order taken

    def stored(self) -> "Statistics":
        """These statistics less those an entry does not store (the largest, the quartiles, the samples)."""
        return Statistics(**{k: getattr(self, k) for k in STORED_STATISTICS})

    def scaled(self, factor: float) -> "Statistics":
        """The statistics of samples `factor` times these (the relative noise is unchanged)."""
        times = {k: getattr(self, k) * factor for k in _TIME_STATISTICS if isinstance(getattr(self, k), (int, float))}
        return replace(self, **times, data=tuple(x * factor for x in self.data),
                       ci_ms=self.ci_ms.scaled(factor) if self.ci_ms is not None else None)

    def to_dict(self) -> dict[str, Any]:
        """The plain record's keys: the interval as [low, high], the samples as a list."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["ci_ms"] = self.ci_ms.to_list() if self.ci_ms is not None else None
        out["data"] = list(self.data)
        return out

    @classmethod
    def from_dict(cls, record: dict[str, Any], keys: tuple[str, ...] | None = None) -> "Statistics":
        """The statistics a plain record holds (of `keys` only, where given; others are ignored)."""
        own = {f.name: record[f.name] for f in fields(cls) if f.name in record and (keys is None or f.name in keys)}
        own["ci_ms"] = Interval.of(record.get("ci_ms"), record.get("samples"))
        own["data"] = tuple(own["data"]) if isinstance(own.get("data"), (list, tuple)) else ()
        return cls(**own)


#: The statistics a baseline entry stores, in the YAML's order, and those that scale with the median.
STORED_STATISTICS = tuple(f.name for f in fields(Statistics) if f.metadata.get("entry"))
_TIME_STATISTICS = ("median_ms", "mean_ms", "min_ms", "max_ms", "stddev_ms", "q1_ms", "q3_ms")


@dataclass(frozen=True)
class Identity:
    """What was measured (as torch.utils.benchmark's TaskSpec): the test's node id, its function's name
    and parametrization id, and the report group it belongs to."""

    nodeid: str
    name: str
    param: str
    group: str

    @classmethod
    def of_nodeid(cls, nodeid: str, group: str | None = None) -> "Identity":
        """The identity a node id implies: its test's name and parametrization; the name as the group
        where none is given."""
        name = nodeid_name(nodeid)
        return cls(nodeid, name, nodeid_param(nodeid), group or name)


@dataclass(frozen=True)
class Judgement:
    """How the gate judged a result against its baseline entry (core.verdict.Verdict as a result keeps
    it and the files store it); NOT_JUDGED, with no verdict, stands for none."""

    verdict: str | None = field(default=None, metadata=_json(16))
    memory_verdict: str | None = field(default=None, metadata=_json(17))
    change: float | None = field(default=None, metadata=_json(18))
    memory_change: float | None = field(default=None, metadata=_json(19))
    noise_bound: float | None = field(default=None, metadata=_json(20))
    fixed_bound: float | None = field(default=None, metadata=_json(21))
    detects: float | None = field(default=None, metadata=_json(32))  # Verdict.detectable
    message: str | None = field(default=None, metadata=_json(23))
    counter_verdict: str | None = field(default=None, metadata=_json(36))  # core.counters: more, less, same
    regression: bool | None = None


NOT_JUDGED = Judgement()
#: A result's parts that its plain record flattens.
_PARTS = ("id", "stats", "judgement")
#: The plain record's keys of each part of a result.
IDENTITY_KEYS = tuple(f.name for f in fields(Identity))
JUDGEMENT_KEYS = tuple(f.name for f in fields(Judgement))


@dataclass
class Result:
    """One test's measurement as the plugin records it: what was measured (`id`), its statistics
    (`stats`), how it was measured and what it reached (its own fields), and the gate's judgement
    (`judgement`, None until judged). Its plain record (`to_dict`, the keys of `gpu_benchmark.stats`)
    is flat: the identity's keys, the statistics', the result's own, then the judgement's."""

    id: Identity
    stats: Statistics
    gbps: float | None = field(default=None, metadata=_json(0))
    tflops: float | None = field(default=None, metadata=_json(1))
    pct_of_peak: float | None = field(default=None, metadata=_json(2))
    bytes: int | None = field(default=None, metadata=_json(3))
    flops: int | None = field(default=None, metadata=_json(4))
    bound: str | None = field(default=None, metadata=_json(5))  # "memory" or "compute": the nearer roofline
    peak: str | None = field(default=None, metadata=_json(30))  # the measured peak % of peak is of (peaks.py)
    above_peak: float | None = field(default=None, metadata=_json(31))  # how far it beat that peak (of_peak)
    peak_memory_bytes: int | None = field(default=None, metadata=_json(6))
    method: str | None = field(default=None, metadata=_json(9))  # a Method value
    calls_per_sample: int = field(default=1, metadata=_json(10))
    cache: str | None = field(default=None, metadata=_json(11))  # a CacheMode value, or "n/a" on the host
    timing: int | None = field(default=None, metadata=_json(12))  # versions.TIMING_VERSION
    node_gap_ms: float = field(default=0.0, metadata=_json(13))
    sm_clock_mhz: int | None = field(default=None, metadata=_json(14))
    throttle: list[str] = field(default_factory=list, metadata=_json(15))
    loaded: bool = field(default=False, metadata=_json(33))  # sampled in an unbroken loop (power cap)
    slow_replay_us: float | None = field(default=None, metadata=_json(34))  # graph replays this much slower per node than fresh
    counters: Counters | None = field(default=None, metadata=_json(35))  # per counter, its value in each counted call
    warnings: list[str] = field(default_factory=list, metadata=_json(25))
    wall_s: float = field(default=0.0, metadata=_json(26))
    measured_s: float = field(default=0.0, metadata=_json(27))
    phases: dict[str, float] | None = field(default=None, metadata=_json(37))  # Phase value -> wall seconds
    # the test's setup, call and teardown (its measurements and its own work), from pytest's reports;
    # set as the session writes its results
    test_s: float | None = field(default=None, metadata=_json(38))
    # set once the gate has run
    remeasured: int = field(default=0, metadata=_json(24))
    first_call_s: float = field(default=0.0, metadata=_json(28))
    history: list[float] | None = field(default=None, metadata=_json(29))  # one median per process (A/B rounds)
    # read from a stored entry (a baseline loaded as results), or an A/B side's rounds (`ab.combined`):
    # kept so that its comparison is the entry's
    peak_memory_history: list[int] | None = field(default=None, metadata={"stored": True})
    drift: float | None = field(default=None, metadata={"stored": True})
    threshold: float | None = field(default=None, metadata=_json(22))
    baseline: Entry | None = None  # the stored entry compared against
    judgement: Judgement | None = None  # set only when the result was judged

    @property
    def judged(self) -> Judgement:
        """The judgement, or NOT_JUDGED (every field None) until there is one: for readers that show a
        verdict where there is one."""
        return self.judgement if self.judgement is not None else NOT_JUDGED

    def to_dict(self) -> dict[str, Any]:
        """The plain record (the judged keys only when a verdict was reached, an entry's stored keys only
        where set)."""
        out: dict[str, Any] = {**asdict(self.id), **self.stats.to_dict()}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _PARTS or (f.metadata.get("stored") and value is None):
                continue
            out[f.name] = value
        out["counters"] = _plain_counters(self.counters)
        out["baseline"] = self.baseline.to_dict() if self.baseline is not None else None
        if self.judgement is not None:
            out.update(asdict(self.judgement))
        return out

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> "Result":
        """A Result from a plain record; unknown keys are ignored, missing ones take their defaults (a
        judgement only where the record holds a verdict). ValueError names a bad counter."""
        own = {f.name: record[f.name] for f in fields(cls) if f.name in record and f.name not in _PARTS}
        own["counters"] = Counters.from_dict(record.get("counters"))
        if isinstance(own.get("baseline"), dict):
            own["baseline"] = Entry.from_dict(own["baseline"])
        judged = record.get("verdict") is not None
        return cls(Identity(**{k: record[k] for k in IDENTITY_KEYS}), Statistics.from_dict(record), **own,
                   judgement=Judgement(**{k: record[k] for k in JUDGEMENT_KEYS if k in record}) if judged else None)

    @classmethod
    def of_entry(cls, nodeid: str, entry: "Entry") -> "Result":
        """A stored entry of test `nodeid` read as a result (`gpuperf show`, `gpuperf compare`)."""
        own = {f.name for f in fields(cls)}
        return cls(id=Identity.of_nodeid(nodeid, entry.group),
                   **{f.name: getattr(entry, f.name) for f in fields(entry) if f.name in own})


#: Keys of a result copied into pytest-benchmark's extra_info in the results JSON.
JSON_EXTRA_KEYS = tuple(f.name for f in sorted((f for part in (Statistics, Result, Judgement) for f in fields(part)
                                                 if "json" in f.metadata), key=lambda f: f.metadata["json"]))


@dataclass
class Entry:
    """One test's stored baseline entry: a subset of Result (its stored statistics, `stats`), plus the
    medians of its recent recordings, from which the gate learns its run-to-run spread. The YAML's
    key order: the stored statistics', then the other fields'."""

    stats: Statistics  # its stored statistics (Statistics.stored), the interval a comparison uses included
    gbps: float | None = None
    tflops: float | None = None
    pct_of_peak: float | None = None
    bound: str | None = None
    peak: str | None = None
    above_peak: float | None = None
    peak_memory_bytes: int | None = None
    method: str | None = None
    cache: str | None = None
    timing: int | str | None = None
    sm_clock_mhz: int | None = None
    throttle: list[str] | None = None  # NVML throttle reasons seen while measuring
    loaded: bool | None = None  # sampled in an unbroken loop, the power cap holding the clock (True or unset)
    slow_replay_us: float | None = None  # the process replayed graphs this much slower per node than a fresh one
    group: str | None = None  # the marker's group, for `gpuperf show`
    wall_s: float | None = None  # seconds its latest recording spent measuring: what shards split by
    counters: Counters | None = None  # per hardware counter, its value in each recent recording
    history: list[float] | None = None  # the median of each recent recording, oldest first (core.noise)
    peak_memory_history: list[int] | None = None  # the peak memory of each recent recording, oldest first
    drift: float | None = None  # schema 1 only: the range of the medians merged into it (largest / smallest - 1)

    def to_dict(self) -> dict[str, Any]:
        """The YAML mapping: every field but an unset history, peak memory history, drift, peak, above_peak,
        slow_replay_us, counters, wall_s or loaded; an unbounded interval (one sample) is stored as null."""
        stats = self.stats
        out = {k: getattr(stats, k) for k in STORED_STATISTICS}
        out["ci_ms"] = stats.ci_ms.to_list() if stats.ci_ms is not None and stats.ci_ms.bounded else None
        out.update((f.name, getattr(self, f.name)) for f in fields(self) if f.name != "stats")
        out["counters"] = _plain_counters(self.counters)
        for optional in ("history", "peak_memory_history", "drift", "peak", "above_peak", "slow_replay_us", "counters",
                         "wall_s"):
            if out[optional] is None:
                del out[optional]
        if not out["loaded"]:
            del out["loaded"]
        return out

    @classmethod
    def of(cls, record: "Result | Entry") -> "Entry":
        """The fields of a result (or another entry) that an entry holds, as they are (a result's group
        is its identity's)."""
        values = {f.name: getattr(record, f.name) for f in fields(cls) if f.name not in ("stats", "group")}
        group = record.id.group if isinstance(record, Result) else record.group
        return cls(record.stats.stored(), **values, group=group)

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> "Entry":
        """An Entry from a stored mapping or a result record (other keys are ignored). ValueError names
        a bad counter."""
        own = {f.name: record[f.name] for f in fields(cls) if f.name in record and f.name != "stats"}
        own["counters"] = Counters.from_dict(record.get("counters"))
        return cls(Statistics.from_dict(record, STORED_STATISTICS), **own)


def _plain_counters(counters: Counters | None) -> dict[str, list[float | int]] | None:
    """The counters as the files and the plain record hold them (counter -> list of values)."""
    return counters.to_dict() if counters is not None else None


#: What the gate compares (core.verdict): a result, or a stored entry.
Measured = Result | Entry


#: A stored entry's fields, in the YAML's order: its stored statistics', then its own.
_ENTRY_FIELDS = tuple(f for f in fields(Statistics) if f.name in STORED_STATISTICS) + tuple(
    f for f in fields(Entry) if f.name != "stats")


def _keys_typed(*annotations: str) -> tuple[str, ...]:
    return tuple(f.name for f in _ENTRY_FIELDS if f.type in annotations)


#: Stored keys, in the YAML's order.
ENTRY_KEYS = tuple(f.name for f in _ENTRY_FIELDS)
#: Stored keys that hold a non-negative float (or null), and those that hold a whole number.
ENTRY_FLOAT_KEYS = _keys_typed("float", "float | None")
ENTRY_INT_KEYS = _keys_typed("int | None")
#: Stored keys that scale inversely with the median (rates).
ENTRY_RATE_KEYS = ("gbps", "tflops")


def of_peak(raw_pct: float) -> tuple[float, float | None]:
    """(% of peak, how far above its peak) of a rate at `raw_pct` percent of the peak it is held
    against. A result faster than that peak (a kernel out-running cuBLAS, or a read-only stream a
    copy) sets its own ceiling: 100%, and `above_peak` keeps by how much it beat the probe."""
    return (100.0, raw_pct / 100.0 - 1.0) if raw_pct > 100.0 else (raw_pct, None)


def raw_pct_of_peak(record: Measured) -> float | None:
    """A record's rate as a percent of its peak before `of_peak` held it to 100; None without one."""
    pct, above = record.pct_of_peak, record.above_peak
    if not isinstance(pct, (int, float)) or isinstance(pct, bool):
        return None
    return pct * (1.0 + above) if isinstance(above, (int, float)) and not isinstance(above, bool) else pct


def peak_fraction(record: Measured | None, peak: str) -> float | None:
    """A record's rate over `peak` before `of_peak` held it to 1; None without a record, or for one
    held against another peak."""
    raw = raw_pct_of_peak(record) if record is not None and record.peak == peak else None
    return raw / 100.0 if raw is not None else None


def required_keys(cls: type) -> tuple[str, ...]:
    """The fields of a record class without a default."""
    return tuple(f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING)


def nodeid_name(nodeid: str) -> str:
    """'path::test_x[p]' -> 'test_x': the test function's name in a pytest node id."""
    return nodeid.split("::")[-1].split("[", 1)[0]


def nodeid_param(nodeid: str) -> str:
    """'path::test_x[p]' -> 'p': the parametrization id in a pytest node id ('' for none)."""
    last = nodeid.split("::")[-1]
    if "[" in last and last.endswith("]"):
        return last[last.index("[") + 1:-1]
    return ""


def record_group(record: Result) -> str:
    """The report group of a result: the group its test declared (marker `group`), else the test's name."""
    return str(record.id.group or record.id.name or nodeid_name(record.id.nodeid))
