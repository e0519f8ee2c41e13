#!/usr/bin/env bash
# One device command on a two-GPU machine: precision_cause_probe.py in PROCESSES processes (default 3)
# on GPU 0 and one on GPU 1, at once; then the precision self-check on GPU 0 and every other harness
# self-check on GPU 1.
set -uo pipefail
. docs/ab-check/setup.sh
(
  for i in $(seq "${PROCESSES:-3}"); do
    CUDA_VISIBLE_DEVICES=0 PYTHONPATH=. timeout 120 python docs/ab-check/precision_cause_probe.py "$OUT/cause-g0-$i.json" > "$OUT/cause-g0-$i.log" 2>&1
  done
  CUDA_VISIBLE_DEVICES=0 timeout 200 python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -rs \
    -p no:randomly -k precision > "$OUT/precision-g0.log" 2>&1
) &
(
  CUDA_VISIBLE_DEVICES=1 PYTHONPATH=. timeout 120 python docs/ab-check/precision_cause_probe.py "$OUT/cause-g1-1.json" > "$OUT/cause-g1-1.log" 2>&1
  CUDA_VISIBLE_DEVICES=1 timeout 300 python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -rs \
    -p no:randomly -k "not precision" > "$OUT/selfcheck-g1.log" 2>&1
) &
wait
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv
for f in "$OUT"/cause-g*.log; do echo "== $f"; cat "$f" | tail -14; done
grep -hE "precision method|runs:|SKIPPED|passed|failed|skipped" "$OUT/precision-g0.log"
grep -E "^  accuracy|side-stream|passed|failed|SKIPPED" "$OUT/selfcheck-g1.log" | sed -E 's/do_bench.*profiled repeat/... repeat/'
echo "$(( $(date +%s) - S )) s"
