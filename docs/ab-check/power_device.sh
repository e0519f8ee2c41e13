#!/usr/bin/env bash
# One device command on a power-capped H100: the bf16 matmul 4096 in an unbroken loop beside the
# harness's median (power_loop_probe.py), where each measurement ran at boost
# (power_phase_probe.py), then the precision self-check in PROCESSES processes (default 2).
set -uo pipefail
. docs/ab-check/setup.sh
PYTHONPATH=. timeout 120 python docs/ab-check/power_loop_probe.py > "$OUT/loop.log" 2>&1
PYTHONPATH=. timeout 100 python docs/ab-check/power_phase_probe.py > "$OUT/phase.log" 2>&1
for i in $(seq "${PROCESSES:-2}"); do
  timeout 200 python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -p no:randomly -k precision > "$OUT/precision$i.log" 2>&1
done
echo "$(( $(date +%s) - S )) s"; cat "$OUT/loop.log"; grep -E "^run" "$OUT/phase.log"
grep -hE "precision|passed|failed|runs:" "$OUT"/precision*.log
