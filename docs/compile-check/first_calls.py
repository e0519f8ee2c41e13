"""Where a results JSON's first calls went: `python docs/compile-check/first_calls.py COLD.json [WARM.json]`.

Prints per file the tests, their summed wall_s and first_call_s (compiling, autotuning, loading),
how many first calls took 0.5 s or more, and the ten slowest; given a second file, the same ten
tests' first calls there beside them."""
from __future__ import annotations

import json
import sys

NOTABLE_S = 0.5  # as the closing summary's FIRST_CALL_NOTABLE_S
SHOWN = 10


def first_calls(path: str) -> dict[str, tuple[float, float]]:
    """Test id -> (first_call_s, wall_s) of a results JSON (pytest-benchmark's format)."""
    with open(path, encoding="utf-8") as f:
        benchmarks = json.load(f)["benchmarks"]
    return {b["fullname"]: (float(b["extra_info"].get("first_call_s") or 0.0), float(b["extra_info"].get("wall_s") or 0.0))
            for b in benchmarks}


def main(paths: list[str]) -> None:
    runs = [first_calls(p) for p in paths]
    for path, run in zip(paths, runs):
        first = sum(f for f, _ in run.values())
        wall = sum(w for _, w in run.values())
        notable = sum(1 for f, _ in run.values() if f >= NOTABLE_S)
        print(f"{path}: {len(run)} tests, measurements {wall:.1f} s, first calls {first:.1f} s "
              f"({notable} of {NOTABLE_S} s or more)")
    slowest = sorted(runs[0].items(), key=lambda item: -item[1][0])[:SHOWN]
    print(f"slowest first calls of {paths[0]}" + (f" (then in {paths[1]})" if len(runs) > 1 else "") + ":")
    for nodeid, (first, _) in slowest:
        after = f" -> {runs[1][nodeid][0]:7.2f} s" if len(runs) > 1 and nodeid in runs[1] else ""
        print(f"  {first:7.2f} s{after}  {nodeid}")


if __name__ == "__main__":
    if not 1 <= len(sys.argv) - 1 <= 2:
        sys.exit(__doc__.splitlines()[0])
    main(sys.argv[1:])
