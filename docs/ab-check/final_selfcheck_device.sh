#!/usr/bin/env bash
# One device command on a two-GPU machine: the steady-state self-check on GPU 0 and every harness
# self-check on GPU 1 (precision included), each in its own process, at once.
set -uo pipefail
. docs/ab-check/setup.sh
CUDA_VISIBLE_DEVICES=0 timeout "${LIMIT_S:-190}" python -m pytest perf_tests/test_steady_state.py -m selfcheck --gpuperf -s -q -rs \
  -p no:randomly > "$OUT/steady.log" 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout "${LIMIT_S:-190}" python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -rs \
  -p no:randomly > "$OUT/harness.log" 2>&1 &
wait
echo "$(( $(date +%s) - S )) s"
grep -E "steady-state|passed|failed|SKIPPED" "$OUT/steady.log" | tail -36
grep -E "precision method|^  accuracy|side-stream|passed|failed|SKIPPED" "$OUT/harness.log" | sed -E 's/do_bench.*profiled repeat/... repeat/'
