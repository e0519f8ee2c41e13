#!/usr/bin/env bash
# The Triton fp32 ELU cases (their dry run at collection makes 16384x16384 inputs) with collection on
# the session's stream, then with the plugin before that change, each against the committed H100
# baseline. First write the earlier plugin next to this script, untracked:
#   git show 41a2857:pytest_gpuperf/plugin/session.py > docs/ab-check/session_before.py
set -uo pipefail
. docs/ab-check/setup.sh
run() {
  timeout 95 python -m pytest perf_tests/test_elementwise.py -k "test_elu and triton and float32" --gpuperf -q \
    -p no:randomly --gpuperf-json "$OUT/$1.json" > "$OUT/$1.log" 2>&1
  echo "$1 rc=$? $(( $(date +%s) - S )) s"; grep -E "64x64|1000x1001|passed|failed" "$OUT/$1.log" | head -6
}
run after
cp pytest_gpuperf/plugin/session.py /tmp/after.py && cp docs/ab-check/session_before.py pytest_gpuperf/plugin/session.py
run before
cp /tmp/after.py pytest_gpuperf/plugin/session.py
