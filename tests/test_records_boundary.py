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
              "measured_s phases remeasured first_call_s history threshold baseline").split()
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

