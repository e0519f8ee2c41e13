"""Adds counted counters (count_suite.py's JSON files) to the stored entries of a baseline, each
entry's counter history extended as a recording would (store.baseline.merged_counters); timings stay.

    python docs/counters-check/add_counters.py baselines/nvidia-h100-80gb-hbm3.yaml elementwise.json ...
"""
import json
import sys
from dataclasses import replace
from pathlib import Path

from pytest_gpuperf.core.counters import Counters
from pytest_gpuperf.core.records import Entry
from pytest_gpuperf.store import baseline

path, files = Path(sys.argv[1]), sys.argv[2:]
stored = baseline.load(path)
counted = {}
for name in files:
    counted.update(json.loads(Path(name).read_text())["counters"])
entries = dict(stored.entries)
for nodeid, counters in counted.items():
    if nodeid in entries:
        entry = entries[nodeid]
        merged = baseline.merged_counters([entry, Entry(entry.stats, counters=Counters.from_dict(counters))])
        entries[nodeid] = replace(entry, counters=merged)
baseline.save(path, stored.device, stored.software, entries, keep_others=False)
missing = sorted(set(entries) - set(counted))
print(f"{path}: counters for {len(set(counted) & set(entries))} of {len(entries)} entries; "
      f"{len(set(counted) - set(entries))} counted tests have no entry; without counters: {missing[:5]}")
