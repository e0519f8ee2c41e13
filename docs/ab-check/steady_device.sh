#!/usr/bin/env bash
# One device command: the loop-length probe and the steady-state self-check (each in its own process:
# CUPTI stays attached once used), the whole suite with its results JSON (for `gpuperf merge`), then
# the harness self-checks.
set -uo pipefail
. docs/ab-check/setup.sh
[ "${PROBE:-1}" = 1 ] && timeout 90 python docs/ab-check/loop_length_probe.py > "$OUT/loop.log" 2>&1; cat "$OUT/loop.log" 2>/dev/null | tail -8
timeout 200 python -m pytest perf_tests/test_steady_state.py -m selfcheck --gpuperf -s -q -p no:randomly > "$OUT/steady.log" 2>&1
echo "steady rc=$? $(( $(date +%s) - S )) s"; grep -E "steady-state|passed|failed" "$OUT/steady.log" | tail -40
S2=$(date +%s)
timeout 380 python -m pytest perf_tests --gpuperf --gpuperf-json="$OUT/suite.json" -q -p no:randomly > "$OUT/suite.log" 2>&1
echo "suite rc=$? $(( $(date +%s) - S2 )) s"
REM=$(( ${BUDGET_S:-585} - ($(date +%s) - S) ))
if [ "$REM" -gt 60 ]; then
  timeout "$REM" python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -p no:randomly -k "precision or accuracy" > "$OUT/selfcheck.log" 2>&1
  echo "selfcheck rc=$?"; grep -E "precision|accuracy  |passed|failed" "$OUT/selfcheck.log" | tail -14
fi
tail -3 "$OUT/suite.log"
