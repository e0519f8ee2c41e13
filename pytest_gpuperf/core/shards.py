"""How a suite splits into shards (`--gpuperf-shard=K/N`): N disjoint parts that cover every test,
balanced by each test's recorded cost. Every shard's process computes the whole partition from the
same inputs and keeps its own part, so the split depends on nothing but the test ids and their costs."""
from __future__ import annotations

import hashlib
import heapq
import math
import statistics
from dataclasses import dataclass
from typing import Any

#: What a test without a recorded cost counts as where no test has one (any one value splits by count).
UNKNOWN_COST = 1.0


@dataclass(frozen=True)
class ShardSpec:
    """Shard `index` (1-based) of `count`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> "ShardSpec":
        """'2/4' -> ShardSpec(2, 4); otherwise a ValueError that shows what a spec looks like."""
        k, slash, n = str(text).strip().partition("/")
        if not (slash and k.strip().isdigit() and n.strip().isdigit()):
            raise ValueError(f"{text!r} is not K/N; write it like 1/4 (shard K of N, K from 1 to N)")
        spec = cls(int(k), int(n))
        if not 1 <= spec.index <= spec.count:
            raise ValueError(f"{text!r}: K must be from 1 to N (e.g. 1/4 ... 4/4)")
        return spec

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def _cost(costs: dict[str, Any], test: str) -> float | None:
    """A test's recorded cost in seconds, None where none is recorded (or it is not a positive number)."""
    value = costs.get(test)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def partition(tests: list[str], costs: dict[str, Any], count: int) -> list[list[str]]:
    """Split `tests` (ids) into `count` parts, each test in exactly one, by greedy longest processing
    time: tests with a recorded cost longest first (ties by id), each to the part with the least cost
    so far (the lowest-numbered on a tie); then the others in id order, each counted at the median
    recorded cost, which deals them round-robin where nothing is recorded."""
    ids = sorted(set(tests))
    known, fill = _recorded(ids, costs)
    order = sorted(known, key=lambda t: (-known[t], t)) + [t for t in ids if t not in known]
    parts: list[list[str]] = [[] for _ in range(count)]
    loads = [(0.0, i) for i in range(count)]  # a heap of (cost so far, part)
    for test in order:
        load, i = heapq.heappop(loads)
        parts[i].append(test)
        heapq.heappush(loads, (load + known.get(test, fill), i))
    return parts


def longest_first(tests: list[str], costs: dict[str, Any]) -> list[str]:
    """`tests` by recorded cost, longest first, a test without one counted at the median recorded
    cost; equal costs keep their order (pytest-xdist's workers must all order alike)."""
    known, fill = _recorded(tests, costs)
    return sorted(tests, key=lambda t: -known.get(t, fill))


def _recorded(tests: list[str], costs: dict[str, Any]) -> tuple[dict[str, float], float]:
    """The recorded costs of `tests` that have one, and what the others count as: their median."""
    known = {t: c for t in tests if (c := _cost(costs, t)) is not None}
    return known, statistics.median(known.values()) if known else UNKNOWN_COST


def digest(tests: list[str], costs: dict[str, Any]) -> str:
    """A fingerprint of what a split is computed from: shards that agree on it split alike."""
    h = hashlib.sha256()
    for test in sorted(set(tests)):
        h.update(f"{test}\t{_cost(costs, test)!r}\n".encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Split:
    """One shard's part of a suite, and what the shards of one split must agree on."""

    spec: ShardSpec
    tests: frozenset[str]  # this shard's test ids
    total: int  # tests in the suite, all shards together
    recorded_s: float  # the recorded cost of this shard's tests
    total_recorded_s: float  # and of the suite's
    unrecorded: int  # this shard's tests without a recorded cost
    digest: str

    @classmethod
    def of(cls, tests: list[str], costs: dict[str, Any], spec: ShardSpec) -> "Split":
        mine = partition(tests, costs, spec.count)[spec.index - 1]
        recorded = lambda ids: sum(c for t in ids if (c := _cost(costs, t)) is not None)  # noqa: E731
        return cls(spec=spec, tests=frozenset(mine), total=len(set(tests)), recorded_s=recorded(mine),
                   total_recorded_s=recorded(set(tests)),
                   unrecorded=sum(_cost(costs, t) is None for t in mine), digest=digest(tests, costs))

    def describe(self) -> str:
        """One line for the terminal: which shard, how many tests, how the split was made."""
        head = f"shard {self.spec}: {len(self.tests)} of {self.total} tests"
        if not self.total_recorded_s:
            return head + ", split by count (no test has a recorded time)"
        head += f", {self.recorded_s:.3g} s of {self.total_recorded_s:.3g} s recorded"
        return head + (f" ({self.unrecorded} without a recorded time)" if self.unrecorded else "")

    def to_dict(self) -> dict[str, Any]:
        """What a shard's results JSON records, for `gpuperf merge-shards` to check the shards by."""
        return {"index": self.spec.index, "count": self.spec.count, "tests": len(self.tests), "of": self.total,
                "digest": self.digest}


def shards_problem(shards: list[tuple[str, Any]]) -> str | None:
    """What is wrong with a set of shard results, (file, its recorded split or None) each, or None:
    files of one split must all record it, agree on it, and be its shards 1..N once each. Files that
    record no split are taken as they are."""
    recorded = [(f, s) for f, s in shards if s is not None]
    if not recorded:
        return None
    unsplit = [f for f, s in shards if s is None]
    if unsplit:
        return f"{unsplit[0]}: records no shard, but {recorded[0][0]} is shard {_spec_text(recorded[0][1])}"
    for f, s in recorded:
        if not (isinstance(s, dict) and all(isinstance(s.get(k), int) for k in ("index", "count"))
                and 1 <= s["index"] <= s["count"]):
            return f"{f}: its shard record {s!r} is not a shard K of N"
    first_file, first = recorded[0]
    for f, s in recorded[1:]:
        if (s["count"], s.get("digest")) != (first["count"], first.get("digest")):
            return (f"{f}: is shard {_spec_text(s)} of a different split than {first_file} (shard {_spec_text(first)}): "
                    f"the runners collected different tests or read different baselines")
    seen: dict[int, str] = {}
    for f, s in recorded:
        if s["index"] in seen:
            return f"{f}: is shard {_spec_text(s)} again (so is {seen[s['index']]})"
        seen[s["index"]] = f
    absent = [str(k) for k in range(1, first["count"] + 1) if k not in seen]
    if absent:
        many = len(absent) > 1
        return (f"shard{'s' if many else ''} {', '.join(absent)} of {first['count']} {'are' if many else 'is'} "
                f"missing: no file given holds {'their' if many else 'its'} results")
    return None


def _spec_text(shard: dict) -> str:
    return f"{shard.get('index')}/{shard.get('count')}"
