"""Records cross the store/, report/ and core/verdict layers as typed objects (core.records: Result,
Entry; core.verdict: Verdict), never as dicts: every public function, method and record field there
is annotated, and no annotation lets a measurement through as a plain mapping (a bare or
`Any`-valued dict or Mapping, or `Any` itself). Mappings keyed by test id that hold records or
numbers are containers, not records, and pass. A machine's description (device, software versions,
peaks) is a plain mapping on purpose, as the files hold it; the files' own readers and writers are
the boundary and are listed in BOUNDARY with what they hand over as a dict.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import importlib
import inspect
import json
import pkgutil
import types
import typing

import pytest

import pytest_gpuperf.report
import pytest_gpuperf.store

#: Modules whose public API must take and return records.
MODULES = sorted({"pytest_gpuperf.core.verdict"}
                 | {m.name for pkg in (pytest_gpuperf.store, pytest_gpuperf.report)
                    for m in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + ".")})
#: Parameters and fields that hold a machine's description, not a measurement: plain mappings.
MACHINE = {"device", "software", "peaks"}
#: The YAML/JSON boundary: (module, function) -> why it hands a dict over.
BOUNDARY = {
    ("pytest_gpuperf.store.results", "benchmark_json"): "returns the results JSON document",
    ("pytest_gpuperf.store.results", "write_json"): "`shard` is the split as the JSON records it",
    ("pytest_gpuperf.store.results", "load_results"): "returns the file's device beside its results",
    ("pytest_gpuperf.store.results", "load_recording"): "returns the file's device and software beside its results",
    ("pytest_gpuperf.store.results", "load_shard"): "returns the file's device, software and split beside its results",
}
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def _untyped(tp) -> list[str]:
    """The parts of an annotation that could carry a record as a plain mapping."""
    if tp is typing.Any:
        return ["Any"]
    origin = typing.get_origin(tp)
    if tp in _MAPPINGS or (origin is None and isinstance(tp, type) and issubclass(tp, dict)):
        return [getattr(tp, "__name__", str(tp))]
    args = typing.get_args(tp)
    if origin in _MAPPINGS and any(a is typing.Any for a in args[1:]):
        return [str(tp)]
    return [bad for a in args if not isinstance(a, (list, type(...))) for bad in _untyped(a)] + [
        bad for a in args if isinstance(a, list) for b in a for bad in _untyped(b)]


def _public(module) -> list[tuple[str, object]]:
    """(qualified name, object) of the module's own public functions, methods and dataclasses."""
    out = []
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj):
            out.append((name, obj))
        elif inspect.isclass(obj):
            if dataclasses.is_dataclass(obj):
                out.append((name, obj))
            out += [(f"{name}.{m}", f) for m, f in vars(obj).items()
                    if not m.startswith("_") and inspect.isfunction(getattr(obj, m))]
    return out


def _problems(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    problems = []
    for qualname, obj in _public(module):
        boundary = (module_name, qualname.split(".")[0]) in BOUNDARY
        if inspect.isclass(obj):  # a record: its fields
            hints = typing.get_type_hints(obj)
            named = [(f.name, hints[f.name]) for f in dataclasses.fields(obj)]
        else:
            hints = typing.get_type_hints(obj)
            params = [p for p in inspect.signature(obj).parameters.values() if p.name not in ("self", "cls")]
            missing = [p.name for p in params if p.name not in hints]
            if missing:
                problems.append(f"{module_name}.{qualname}: not annotated: {', '.join(missing)}")
            if "return" not in hints:
                problems.append(f"{module_name}.{qualname}: no return annotation")
            named = [(p.name, hints[p.name]) for p in params if p.name in hints]
            named += [("return", hints["return"])] if "return" in hints else []
        for name, tp in named:
            if name in MACHINE or boundary:
                continue
            bad = _untyped(tp)
            if bad:
                problems.append(f"{module_name}.{qualname}: {name}: {tp} ({', '.join(bad)}): pass a record")
    return problems


@pytest.mark.parametrize("module_name", MODULES)
def test_no_dict_crosses_the_layer_boundary(module_name: str) -> None:
    assert _problems(module_name) == []


def test_the_check_sees_a_dict_where_a_record_belongs() -> None:
    """The rule itself: what it flags and what it lets through."""
    flagged = [dict, dict[str, typing.Any], typing.Mapping[str, typing.Any], typing.Any, list[dict],
               dict | None, tuple[dict | None, list[dict]], typing.Callable[[], dict]]
    assert all(_untyped(tp) for tp in flagged), [tp for tp in flagged if not _untyped(tp)]
    from pytest_gpuperf.core.records import Entry, Measured, Result
    from pytest_gpuperf.core.verdict import Verdict
    passed = [Result, Entry | None, Measured, list[Result], dict[str, Entry], collections.abc.Mapping[str, Verdict],
              dict[str, float], typing.Callable[[], tuple[Result, int]], tuple[str, str]]
    assert not any(_untyped(tp) for tp in passed), [tp for tp in passed if _untyped(tp)]


def test_the_boundary_list_names_functions_that_exist() -> None:
    for module_name, name in BOUNDARY:
        assert callable(getattr(importlib.import_module(module_name), name, None)), (module_name, name)
    assert "pytest_gpuperf.store.baseline" in MODULES and "pytest_gpuperf.report.rows" in MODULES


#: The plain record's keys, in order (`gpu_benchmark.stats`, pytest-xdist's user_properties): the
#: identity's, the statistics' (the samples last), the result's own, then the judgement's, only where judged.
PLAIN_KEYS = ("nodeid name param group median_ms mean_ms min_ms max_ms stddev_ms q1_ms q3_ms noise ci_ms samples data "
              "gbps tflops pct_of_peak bytes flops bound peak above_peak peak_memory_bytes method calls_per_sample "
              "cache timing node_gap_ms sm_clock_mhz throttle loaded slow_replay_us counters warnings wall_s "
              "measured_s phases test_s remeasured first_call_s history threshold baseline").split()
JUDGED_KEYS = "verdict memory_verdict change memory_change noise_bound fixed_bound detects message counter_verdict regression".split()


def test_a_result_is_identity_statistics_and_judgement_and_its_plain_record_stays_flat() -> None:
    from pytest_gpuperf.core.records import UNBOUNDED, Identity, Interval, Judgement, Result
    from pytest_gpuperf.core.verdict import judge

    plain = {"nodeid": "t.py::test_k[a]", "name": "test_k", "param": "a", "group": "g", "median_ms": 1.1,
             "ci_ms": [1.09, 1.11], "samples": 50, "noise": 0.01}
    r = Result.from_dict(plain)
    assert r.id == Identity("t.py::test_k[a]", "test_k", "a", "g") and r.judgement is None
    assert r.stats.ci_ms == Interval(1.09, 1.11) and r.judged.verdict is None
    assert list(r.to_dict()) == PLAIN_KEYS and r.to_dict()["ci_ms"] == [1.09, 1.11]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.id.nodeid = "other"  # what was measured does not change
    r.judgement = judge(Result.from_dict(dict(plain, median_ms=1.0)), r, 0.05).judgement()
    assert isinstance(r.judgement, Judgement) and r.judgement.verdict == "slower" and r.judgement.regression
    assert list(r.to_dict()) == PLAIN_KEYS + JUDGED_KEYS
    assert Result.from_dict(r.to_dict()) == r
    once = Result.from_dict(dict(plain, ci_ms=[float("-inf"), float("inf")], samples=1))
    assert once.stats.ci_ms == UNBOUNDED and Result.from_dict(once.to_dict()).stats.ci_ms == UNBOUNDED


def test_the_statistics_are_one_frozen_record_built_from_the_samples_and_shared_by_result_and_entry() -> None:
    from pytest_gpuperf.core.records import (ENTRY_KEYS, STORED_STATISTICS, Entry, Identity, Interval, Result,
                                             Statistics)
    from pytest_gpuperf.measure.stats import summarize

    stats = summarize([1.02, 0.98, 1.0, 1.01, 0.99, 1.0])
    assert stats.data == (1.02, 0.98, 1.0, 1.01, 0.99, 1.0) and stats.samples == 6 and stats.ci_ms.bounded
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.median_ms = 0.5  # a measurement's statistics do not change; `scaled` makes new ones
    statistic = {f.name for f in dataclasses.fields(Statistics)}
    # no record keeps a statistic of its own beside them
    assert not statistic & {f.name for part in (Result, Entry) for f in dataclasses.fields(part)}
    r = Result(Identity.of_nodeid("t.py::test_k[a]"), stats, method="events", cache="cold", timing=1)
    assert Result.from_dict(r.to_dict()) == r and r.to_dict()["data"] == list(stats.data)
    entry = Entry.of(r)
    # an entry keeps the stored statistics, first in the YAML and in their order
    assert entry.stats == stats.stored() and entry.stats.data == () and entry.stats.max_ms is None
    assert ENTRY_KEYS[:len(STORED_STATISTICS)] == STORED_STATISTICS == tuple(entry.to_dict())[:len(STORED_STATISTICS)]
    assert Entry.from_dict(entry.to_dict()).stats == entry.stats == Entry.from_dict(r.to_dict()).stats
    doubled = stats.scaled(2.0)
    assert doubled.median_ms == 2 * stats.median_ms and doubled.ci_ms == stats.ci_ms.scaled(2.0)
    assert doubled.noise == stats.noise and doubled.data == tuple(2 * x for x in stats.data)
    assert Statistics.from_dict({"median_ms": 1.0, "data": "not samples"}).data == ()


def test_one_sample_statistics_are_unbounded_and_survive_every_file(tmp_path) -> None:
    """A call timed once: its interval is the explicit unbounded one (infinite ends) in the record, null
    in the YAML beside samples 1, [null, null] in the JSON, and read back unbounded from each."""
    from pytest_gpuperf.core.records import UNBOUNDED, Entry, Identity, Result
    from pytest_gpuperf.core.verdict import relative_halfwidth
    from pytest_gpuperf.measure.stats import summarize
    from pytest_gpuperf.store import baseline, results

    once = summarize([300.0])
    assert (once.ci_ms, once.samples, once.data, once.stddev_ms) == (UNBOUNDED, 1, (300.0,), 0.0)
    assert once.ci_ms.half_width == float("inf") and once.scaled(0.5).ci_ms == UNBOUNDED
    r = Result(Identity.of_nodeid("t.py::test_long"), once, method="events", cache="cold", timing=1)
    assert relative_halfwidth(r) == float("inf") and r.to_dict()["ci_ms"] == [float("-inf"), float("inf")]
    assert Result.from_dict(r.to_dict()).stats == once
    stored = Entry.of(r).to_dict()
    assert stored["ci_ms"] is None and stored["samples"] == 1 and Entry.from_dict(stored).stats.ci_ms == UNBOUNDED
    path = tmp_path / "k.yaml"
    baseline.save(path, {"key": "k"}, {}, {r.id.nodeid: r})
    assert baseline.load(path).entries[r.id.nodeid].stats == once.stored()
    js = tmp_path / "r.json"
    results.write_json(js, [r], {"key": "k"}, {}, "2026-01-01T00:00:00")
    assert json.loads(js.read_text())["benchmarks"][0]["extra_info"]["ci_ms"] == [None, None]
    (back,) = results.load_results(js)[1]
    assert back.stats.ci_ms == UNBOUNDED and back.stats.samples == 1 and back.stats.data == (300.0,)


def test_counters_travel_as_a_counters_record_and_are_plain_lists_only_in_the_files(tmp_path) -> None:
    """A result's and an entry's counters are one core.counters.Counters, built where they are counted
    or read; the plain record, the results JSON and the baseline YAML hold counter -> list of numbers."""
    import yaml

    from pytest_gpuperf.core.counters import Counters
    from pytest_gpuperf.core.records import Entry, Identity, Result, Statistics
    from pytest_gpuperf.store import baseline, results

    plain = {"instructions": [1000], "dram_read_bytes": [4096], "occupancy_pct": [87.5]}
    counted = Counters.from_dict(plain)
    r = Result(Identity.of_nodeid("t.py::test_k[a]"), Statistics(1.0, samples=3, noise=0.01), method="events",
               cache="cold", timing=1, counters=counted)
    entry = Entry.of(r)
    r.baseline = entry
    assert isinstance(entry.counters, Counters) and entry.counters == counted
    record = r.to_dict()
    assert record["counters"] == plain and record["baseline"]["counters"] == plain
    back = Result.from_dict(record)
    assert back.counters == counted == back.baseline.counters and isinstance(back.baseline.counters, Counters)
    assert entry.to_dict()["counters"] == plain and Entry.from_dict(entry.to_dict()).counters == counted

    path = tmp_path / "k.yaml"
    baseline.save(path, {"key": "k"}, {}, {r.id.nodeid: r})
    assert yaml.safe_load(path.read_text())["entries"][r.id.nodeid]["counters"] == plain
    assert baseline.load(path).entries[r.id.nodeid].counters == counted

    js = tmp_path / "r.json"
    results.write_json(js, [r], {"key": "k"}, {}, "2026-01-01T00:00:00")
    extra = json.loads(js.read_text())["benchmarks"][0]["extra_info"]
    assert extra["counters"] == plain and extra["baseline_counters"] == plain
    (loaded,) = results.load_results(js)[1]
    assert loaded.counters == counted and loaded.baseline.counters == counted
    with pytest.raises(ValueError, match="counter 'instructions'"):
        Result.from_dict(dict(record, counters={"instructions": ["lots"]}))
