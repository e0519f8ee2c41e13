#!/usr/bin/env bash
# One device command on a two-GPU machine: the precision self-check in PROCESSES processes (default 3)
# on each GPU at once, then the other harness self-checks on GPU 1 (SELFCHECK=1).
set -uo pipefail
. docs/ab-check/setup.sh
for g in 0 1; do
  (
    for i in $(seq "${PROCESSES:-3}"); do
      CUDA_VISIBLE_DEVICES=$g timeout 200 python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -rs \
        -p no:randomly -k precision > "$OUT/precision-g$g-$i.log" 2>&1
    done
    if [ "$g" = 1 ] && [ "${SELFCHECK:-0}" = 1 ]; then
      CUDA_VISIBLE_DEVICES=1 timeout 300 python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -rs \
        -p no:randomly -k "not precision" > "$OUT/selfcheck-g1.log" 2>&1
    fi
  ) &
done
wait
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv
for f in "$OUT"/precision-g*.log; do echo "== $f"; grep -hE "precision method|runs:|SKIPPED|passed|failed|skipped" "$f"; done
[ -f "$OUT/selfcheck-g1.log" ] && tail -5 "$OUT/selfcheck-g1.log"
echo "$(( $(date +%s) - S )) s"
