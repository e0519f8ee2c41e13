"""A pytest plugin for the speed checks: the batches of every measurement (`CudaTimer._sample`), one JSON
line each, appended to $GPUPERF_SETTLE_TRACE: the test, whether the call was `loaded` and sampled
`unbroken`, and per batch its phase, sample count, median and 51 quantiles (ms per call, as the samples
are stored). Load it with `PYTHONPATH=docs/speed-check pytest -p settle_trace ...`;
`python settle_trace.py TRACE...` says how far each settling batch lay from the samples that followed
it, and replays the stop rule with the settling batch counted as the first sample batch: the batches
it saves, and how far that moves each median and its interval.

Since commit e9bf132 only `loaded` calls run a settling batch, so a trace of later code replays those
alone. Left out: measurements that restarted, that dropped a batch for the host, or that kept fewer
than three batches. Where the stop rule never reaches the precision on the recorded batches, the
replay takes it that the time budget ended the measurement, one batch short of what it had: a run
that had stopped on the precision would have sampled further, so for such calls "batches fewer" and
"intervals wider than the precision" are estimates."""
from __future__ import annotations

import json
import os
import statistics
import sys

_PATH = os.environ.get("GPUPERF_SETTLE_TRACE")
QUANTILES = 50  # a batch is kept as its 0, 2, ..., 100th percentiles
_state: dict = {"node": "?"}


def pytest_runtest_logstart(nodeid: str, location) -> None:
    _state["node"] = nodeid


def _sketch(values: list[float]) -> dict:
    data = sorted(values)
    n = len(data)
    return {"n": n, "median": statistics.median(data),
            "q": [round(data[min(n - 1, round(i * (n - 1) / QUANTILES))], 7) for i in range(QUANTILES + 1)]}


def pytest_configure(config) -> None:
    if not _PATH:
        return
    from pytest_gpuperf.measure import cuda_timer

    batch, sample = cuda_timer.CudaTimer._batch, cuda_timer.CudaTimer._sample

    def traced_batch(self, *args, **kwargs):
        raw = batch(self, *args, **kwargs)
        log = getattr(self, "_settle_log", None)
        if log is not None:
            log.append((self.phases._open[-1].value if self.phases._open else "", list(raw)))
        return raw

    def traced_sample(self, body, host_ms, est_ms, divisor, flush, sync, each_ms=0.0, gap_ms=0.0):
        self._settle_log = []
        try:
            samples, medians = sample(self, body, host_ms, est_ms, divisor, flush, sync, each_ms, gap_ms)
        finally:
            log, self._settle_log = self._settle_log, None
        overhead = self._timer_overhead_ms(flush)
        batches = [{"phase": phase, **_sketch([max((t - overhead - gap_ms) / divisor, 0.0) for t in raw])}
                   for phase, raw in log if raw]
        line = {"node": _state["node"], "loaded": bool(self.loaded), "unbroken": bool(self.unbroken), "kept": medians,
                "batches": batches}
        with open(_PATH, "a") as out:
            out.write(json.dumps(line) + "\n")
        return samples, medians

    cuda_timer.CudaTimer._batch, cuda_timer.CudaTimer._sample = traced_batch, traced_sample


# ---- replay ------------------------------------------------------------------------------------
def _pooled_median(batches: list[dict]) -> float:
    """The median of the batches' samples together, from their quantile sketches."""
    points = sorted((v, b["n"] / len(b["q"])) for b in batches for v in b["q"])
    half, seen = sum(w for _, w in points) / 2, 0.0
    for value, weight in points:
        seen += weight
        if seen >= half:
            return value
    return points[-1][0]


def _stops(batches: list[dict], precision: float, min_batches: int) -> int | None:
    """How many of `batches` the stop rule takes (precision reached), or None if it never does."""
    from pytest_gpuperf.measure.stats import _ci_half_width

    for k in range(min_batches, len(batches) + 1):
        median = _pooled_median(batches[:k])
        if median > 0 and _ci_half_width(median, [], [b["median"] for b in batches[:k]]) / median <= precision:
            return k
    return None


def _measurements(paths: list[str]) -> list[dict]:
    """Measurements whose batches are one settling batch, then the samples kept (no restart, no
    batch dropped for the host)."""
    out = []
    for path in paths:
        for line in open(path):
            m = json.loads(line)
            phases = [b["phase"] for b in m["batches"]]
            if phases and phases[0] == "settling" and phases[1:] == ["samples"] * len(m["kept"]):
                out.append(m)
    return out


def main(paths: list[str], precision: float = 0.005, min_batches: int = 5) -> None:
    from pytest_gpuperf.measure.stats import _ci_half_width

    rows = []
    for m in _measurements(paths):
        settle, kept = m["batches"][0], m["batches"][1:]
        if len(kept) < 3:  # the interval needs three batch medians
            continue
        now = _pooled_median(kept)
        medians = [b["median"] for b in kept]
        spread = statistics.stdev(medians) / now if now else 0.0
        off = settle["median"] / statistics.median(medians) - 1
        took = _stops([settle] + kept, precision, min_batches)
        k = took if took is not None else len(kept)  # the budget ended it: as many batches as it had
        new = [settle] + kept[: k - 1] if took is not None else [settle] + kept[:-1]
        new_median = _pooled_median(new)
        ci_now = _ci_half_width(now, [], medians) / now
        ci_new = _ci_half_width(new_median, [], [b["median"] for b in new]) / new_median
        rows.append({"node": m["node"], "loaded": m["loaded"], "off": off, "spread": spread,
                     "moved": new_median / now - 1, "ci_now": ci_now, "ci_new": ci_new,
                     "saved": len(kept) + 1 - len(new)})
    for loaded in (False, True):
        part = [r for r in rows if r["loaded"] == loaded]
        if not part:
            continue
        offs = sorted(abs(r["off"]) for r in part)
        far = [r for r in part if abs(r["off"]) > max(3 * r["spread"], 0.005)]
        moved = sorted(abs(r["moved"]) for r in part)
        print(f"{'loaded' if loaded else 'not loaded'}: {len(part)} measurements; the settling batch's median "
              f"off the samples' batches by {_pct(offs, 0.5)} (median), {_pct(offs, 0.9)} (90%), {offs[-1]:.2%} (most); "
              f"off by more than 3 batch spreads and 0.5% in {len(far)}")
        print(f"  counted as the first batch: {sum(r['saved'] for r in part)} batches fewer; medians moved "
              f"{_pct(moved, 0.5)} (median), {_pct(moved, 0.9)} (90%), {moved[-1]:.2%} (most); interval wider "
              f"than the precision in {sum(r['ci_new'] > precision for r in part)} (was {sum(r['ci_now'] > precision for r in part)})")
        for r in sorted(far, key=lambda r: -abs(r["off"]))[:8]:
            print(f"    {r['off']:+.2%} (spread {r['spread']:.2%}, moved {r['moved']:+.2%}) {r['node']}")


def _pct(values: list[float], q: float) -> str:
    return f"{values[min(len(values) - 1, int(q * len(values)))]:.2%}"


if __name__ == "__main__":
    main(sys.argv[1:])
