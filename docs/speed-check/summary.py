"""A results JSON's measuring time by phase and its verdicts: how many tests read slower or unsure,
and how many of the tests of 20 µs or more were unsure (the gate's figures, docs/gate.md).

    python docs/speed-check/summary.py results.json
"""
import collections
import json
import sys

LONG_MS = 0.02

doc = json.load(open(sys.argv[1]))
records = [b["extra_info"] | {"median_ms": b["stats"]["median"] * 1e3, "nodeid": b["fullname"]} for b in doc["benchmarks"]]
phases = collections.Counter()
for r in records:
    phases.update(r.get("phases") or {})
phases["first call"] = sum(r.get("first_call_s") or 0 for r in records)  # (older files also had it in phases)
wall = sum(r.get("wall_s") or 0 for r in records)
device = sum(r.get("measured_s") or 0 for r in records)
print(f"{len(records)} measurements, {wall:.1f} s measuring, {device:.1f} s of it device time in samples; "
      + ", ".join(f"{k} {v:.1f} s" for k, v in phases.most_common()))
loaded = [r for r in records if r.get("loaded")]
print(f"loaded {len(loaded)}: power cap {sum((r.get('phases') or {}).get('power cap', 0) for r in records):.1f} s in "
      f"{sum(1 for r in records if (r.get('phases') or {}).get('power cap'))} measurements")
verdicts = collections.Counter(r.get("verdict") for r in records)
long = [r for r in records if r["median_ms"] >= LONG_MS]
unsure_long = sum(1 for r in long if r.get("verdict") == "unsure")
open_long = sum(1 for r in long if r.get("verdict") == "unsure" and r.get("counter_verdict") not in ("same", "more", "less"))
print(f"verdicts {dict(verdicts)}; unsure among {len(long)} tests >= 20 µs: {unsure_long} "
      f"({unsure_long / max(len(long), 1):.1%}), {open_long} ({open_long / max(len(long), 1):.1%}) of them not decided by "
      f"counters either; counters {dict(collections.Counter(r.get('counter_verdict') for r in records))}")
for r in records:
    if r.get("verdict") == "slower":
        print("  slower:", r.get("nodeid"), r.get("message"))
    if r.get("counter_verdict") == "more":
        print("  counters more:", r.get("nodeid"), r.get("message"))
undecided = [r for r in records if r.get("detects") is not None and r.get("threshold") is not None
             and r["detects"] > r["threshold"]]
print(f"time could not see its threshold in {len(undecided)}; counters decided "
      f"{sum(1 for r in undecided if r.get('counter_verdict') in ('same', 'more', 'less'))} of them (other kernels "
      f"than recorded in {sum(1 for r in undecided if r.get('counter_verdict') == 'other')})")
