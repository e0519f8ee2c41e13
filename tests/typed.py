"""Plain-dict test data made into the records the gate takes (core.records): the tests write a
measurement as a dict literal, and these turn it into a Result at the call."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from pytest_gpuperf.core import verdict
from pytest_gpuperf.core.records import Entry, Measured, Result


def result(record: dict[str, Any] | Measured | None) -> Measured | None:
    """`record` as a Result (of test 't::t' where it names none); a record as it is."""
    if record is None or isinstance(record, (Result, Entry)):
        return record
    return Result.from_dict({"nodeid": "t::t", "name": "t", "param": "", "group": "t", "median_ms": 1.0, **record})


def judged(record: Result, threshold: float | None = None, **judgement: Any) -> Result:
    """`record` (changed in place) judged with these judgement fields over what it held, and `threshold`."""
    record.judgement = replace(record.judged, **judgement)
    if threshold is not None:
        record.threshold = threshold
    return record


def judge(base, now, threshold, *args, **kwargs) -> verdict.Verdict:
    return verdict.judge(result(base), result(now), threshold, *args, **kwargs)


def judge_all(base, now, threshold, *args, **kwargs) -> dict[str, verdict.Verdict]:
    return verdict.judge_all({k: result(r) for k, r in base.items()}, {k: result(r) for k, r in now.items()},
                             threshold, *args, **kwargs)


def remeasure_while_suspect(base, run: Callable, *args, **kwargs):
    """The rule, with `run` returning (dict, payload) and the kept record handed back as a dict."""
    def typed_run():
        record, payload = run()
        return result(record), payload

    record, payload, v, again = verdict.remeasure_while_suspect(result(base), typed_run, *args, **kwargs)
    return record.to_dict(), payload, v, again
