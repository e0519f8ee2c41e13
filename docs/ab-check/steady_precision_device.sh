#!/usr/bin/env bash
# One device command on a two-GPU machine: the steady-state self-check on GPU 0 while GPU 1 runs the
# precision self-check in PROCESSES processes (default 3), one after another.
set -uo pipefail
. docs/ab-check/setup.sh
CUDA_VISIBLE_DEVICES=0 timeout "${LIMIT_S:-200}" python -m pytest perf_tests/test_steady_state.py -m selfcheck --gpuperf -s -q -rs \
  -p no:randomly > "$OUT/steady.log" 2>&1 &
(
  for i in $(seq "${PROCESSES:-3}"); do
    CUDA_VISIBLE_DEVICES=1 timeout 200 python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -rs \
      -p no:randomly -k precision > "$OUT/precision-g1-$i.log" 2>&1
  done
) &
wait
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv
echo "$(( $(date +%s) - S )) s"
grep -E "steady-state|passed|failed|SKIPPED" "$OUT/steady.log" | tail -36
for f in "$OUT"/precision-g1-*.log; do echo "== $f"; grep -hE "precision method|runs:|SKIPPED|passed|failed|skipped" "$f"; done
