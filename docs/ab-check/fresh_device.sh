#!/usr/bin/env bash
# One device command on a freshly started machine: the smoke subset, the whole suite against the
# committed baselines (results JSON kept for `gpuperf merge`), then the harness self-checks.
set -uo pipefail
. docs/ab-check/setup.sh
timeout 100 python -m pytest perf_tests -m smoke --gpuperf -q -p no:randomly > "$OUT/smoke.log" 2>&1
echo "smoke rc=$? $(( $(date +%s) - S )) s"
S2=$(date +%s)
timeout 400 python -m pytest perf_tests --gpuperf --gpuperf-json="$OUT/suite.json" -q -p no:randomly > "$OUT/suite.log" 2>&1
echo "suite rc=$? $(( $(date +%s) - S2 )) s"
REM=$(( ${BUDGET_S:-585} - ($(date +%s) - S) ))
echo "selfcheck budget $REM s"
S3=$(date +%s)
timeout "$REM" python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -p no:randomly > "$OUT/selfcheck.log" 2>&1
echo "selfcheck rc=$? $(( $(date +%s) - S3 )) s"
grep -E "passed|failed" "$OUT/smoke.log" "$OUT/suite.log" "$OUT/selfcheck.log" | tail -6
