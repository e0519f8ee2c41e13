#!/usr/bin/env bash
# One device command on a freshly started machine: the smoke subset, the whole suite against the
# committed baselines (results JSON kept for `gpuperf merge`), the steady-state self-check (its own
# process: CUPTI stays attached once used), then the harness self-checks while time is left.
set -uo pipefail
. docs/ab-check/setup.sh
timeout 100 python -m pytest perf_tests -m smoke --gpuperf -q -p no:randomly > "$OUT/smoke.log" 2>&1
echo "smoke rc=$? $(( $(date +%s) - S )) s"
S2=$(date +%s)
timeout 380 python -m pytest perf_tests --gpuperf --gpuperf-json="$OUT/suite.json" -q -p no:randomly > "$OUT/suite.log" 2>&1
echo "suite rc=$? $(( $(date +%s) - S2 )) s"
REM=$(( ${BUDGET_S:-585} - ($(date +%s) - S) ))
if [ "$REM" -gt 40 ]; then
  timeout "$REM" python -m pytest perf_tests/test_steady_state.py -m selfcheck --gpuperf -s -q -p no:randomly > "$OUT/steady.log" 2>&1
  echo "steady rc=$?"; grep -E "steady-state|passed|failed" "$OUT/steady.log" | tail -40
fi
REM=$(( ${BUDGET_S:-585} - ($(date +%s) - S) ))
if [ "$REM" -gt 60 ]; then
  timeout "$REM" python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -p no:randomly -k "precision or accuracy" > "$OUT/selfcheck.log" 2>&1
  echo "selfcheck rc=$?"; grep -E "precision|accuracy  |passed|failed" "$OUT/selfcheck.log" | tail -14
fi
grep -E "passed|failed" "$OUT/smoke.log" "$OUT/suite.log" | tail -4
