#!/usr/bin/env bash
# One device command: the graph-overlap probe, the steady-state self-check in two processes (CUPTI stays
# attached once used, and graph-timed calls differ by process), then the precision self-check.
set -uo pipefail
. docs/ab-check/setup.sh
timeout 120 env PYTHONPATH=. python docs/ab-check/graph_overlap_probe.py > "$OUT/overlap.log" 2>&1
echo "probe rc=$? $(( $(date +%s) - S )) s"; grep -v Warn "$OUT/overlap.log" | grep -v _warn_once
for i in 1 2; do
  timeout 150 python -m pytest perf_tests/test_steady_state.py -m selfcheck --gpuperf -s -q -p no:randomly > "$OUT/steady$i.log" 2>&1
  echo "steady$i rc=$? $(( $(date +%s) - S )) s"; grep -E "passed|failed" "$OUT/steady$i.log" | tail -3
done
timeout 200 python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -p no:randomly -k precision > "$OUT/precision.log" 2>&1
echo "precision rc=$? $(( $(date +%s) - S )) s"; grep -E "precision|passed|failed" "$OUT/precision.log" | tail -8
