"""Counts a pytest selection's gpu_benchmark calls once under Nsight Compute, the way
`--gpuperf-counters` does before timing, and writes test id -> counters as JSON (docs/counters.md).

    python docs/counters-check/count_suite.py OUT.json perf_tests [pytest args...]
"""
import json
import sys
from pathlib import Path

from pytest_gpuperf.measure.counters import run_counting

out, args = Path(sys.argv[1]), sys.argv[2:]
run = run_counting([*args, "--gpuperf"], Path.cwd(), xdist=False, say=print)
out.write_text(json.dumps({"seconds": run.seconds, "kernels": run.kernels, "cost": run.cost_text(),
                           "counters": {k: v.to_dict() for k, v in run.counters.items()}}, indent=1))
print(f"{len(run.counters)} calls, {run.kernels} kernels, {run.cost_text()}; log {run.log}")
