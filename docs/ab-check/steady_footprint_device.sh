#!/usr/bin/env bash
# The steady-state self-check in a process of its own footprint (~5 GiB of cases), then in one that
# first maps and keeps FOOTPRINT_MIB more (footprint_conftest.py): does the footprint move CUPTI's
# durations of graph-replayed calls as it moves the harness's (docs/measurement.md)?
set -uo pipefail
. docs/ab-check/setup.sh
steady() {
  timeout 220 python -m pytest perf_tests/test_steady_state.py -m selfcheck --gpuperf -s -q -p no:randomly > "$OUT/$1.log" 2>&1
  echo "$1 rc=$? $(( $(date +%s) - S )) s"; grep -E "passed|failed" "$OUT/$1.log" | tail -1
}
steady own
cp perf_tests/conftest.py /tmp/conftest.py && cat docs/ab-check/footprint_conftest.py >> perf_tests/conftest.py
FOOTPRINT_MIB=${FOOTPRINT_MIB:-16384} steady footprint
cp /tmp/conftest.py perf_tests/conftest.py
[ "${TWICE:-0}" = 1 ] && steady own-again
