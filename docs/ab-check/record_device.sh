#!/usr/bin/env bash
# Two recordings of the whole suite on one machine, each in its own process (--gpuperf-save). The
# first is also the gate against the committed baseline; the baseline after each run is kept.
# RUNS=1: the gate run alone (a recording too, through its JSON).
set -uo pipefail
. docs/ab-check/setup.sh
timeout "${FIRST_S:-330}" python -m pytest perf_tests --gpuperf --gpuperf-save --gpuperf-json="$OUT/r1.json" \
  -q -p no:randomly > "$OUT/r1.log" 2>&1
echo "run 1 rc=$? $(( $(date +%s) - S )) s"; mkdir -p "$OUT/after1" && cp baselines/*.yaml "$OUT/after1/"
[ "${RUNS:-2}" = 1 ] && { grep -E "passed|failed|measured:" "$OUT/r1.log" | tail -3; exit 0; }
REM=$(( ${BUDGET_S:-585} - ($(date +%s) - S) ))
timeout "$REM" python -m pytest perf_tests --gpuperf --gpuperf-save --gpuperf-no-compare --gpuperf-json="$OUT/r2.json" \
  -q -p no:randomly > "$OUT/r2.log" 2>&1
echo "run 2 rc=$? $(( $(date +%s) - S )) s"; mkdir -p "$OUT/after2" && cp baselines/*.yaml "$OUT/after2/"
grep -E "passed|failed|slower|faster|same" "$OUT/r1.log" | tail -8; tail -2 "$OUT/r2.log"
