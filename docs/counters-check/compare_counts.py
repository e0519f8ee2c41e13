"""Compares two count_suite.py JSON files of unchanged code (two processes): per counter, how many
tests read identical and the largest move, and the counter gate's verdict of the second against the
first (docs/counters.md, "Unchanged code").

    python docs/counters-check/compare_counts.py FIRST.json [FIRST2.json ...] -- SECOND.json [...]
"""
import json
import sys
from pathlib import Path

from pytest_gpuperf.core.counters import SPECS, Counters, judge_counters

args = sys.argv[1:]
split = args.index("--")


def load(names):
    out = {}
    for name in names:
        out.update(json.loads(Path(name).read_text())["counters"])
    return {k: Counters.from_dict(v) for k, v in out.items()}


first, second = load(args[:split]), load(args[split + 1:])
both = sorted(set(first) & set(second))
print(f"{len(both)} tests in both ({len(first)} and {len(second)} counted)")
for spec in SPECS:
    moves = []
    for nodeid in both:
        a, b = first[nodeid].center(spec.name), second[nodeid].center(spec.name)
        if a is not None and b is not None:
            moves.append((abs(b / a - 1.0) if a else float(b != a), nodeid, a, b))
    if moves:
        same = sum(1 for m in moves if m[0] == 0)
        worst = max(moves)
        print(f"{spec.name}: identical in {same} of {len(moves)}; largest move {worst[0]:.3%} "
              f"({worst[2]:,.0f} -> {worst[3]:,.0f}, {worst[1]})")
verdicts = {}
for nodeid in both:
    v = judge_counters(first[nodeid], second[nodeid])
    verdicts.setdefault(v.verdict, []).append((nodeid, v.message))
print("verdicts:", {k: len(v) for k, v in verdicts.items()})
for word in ("more", "less", "other"):
    for nodeid, message in verdicts.get(word, [])[:20]:
        print(f"  {word}: {nodeid}: {message}")
