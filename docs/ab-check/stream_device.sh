#!/usr/bin/env bash
# Which stream a graph is replayed from (docs/measurement.md): plain processes timing from the legacy
# default stream (state_trigger_probe.py), then the steady-state self-check alone, with 16 GiB mapped
# at collection (after the session made the tests' stream) and at conftest import (before it).
set -uo pipefail
. docs/ab-check/setup.sh
for p in none ones16 stream; do
  PREP=$p timeout 120 python docs/ab-check/state_trigger_probe.py 2>&1 | grep -v Warning | tee -a "$OUT/trigger.log" | grep PREP
done
cat "${GPUPERF_CACHE_DIR:-$HOME/.cache/pytest-gpuperf}/node-gap.json" > "$OUT/node-gap.json" 2>/dev/null; cat "$OUT/node-gap.json"; echo
steady() {
  timeout 200 python -m pytest perf_tests/test_steady_state.py -m selfcheck --gpuperf -s -q -p no:randomly > "$OUT/$1.log" 2>&1
  echo "$1 rc=$? $(( $(date +%s) - S )) s: $(grep -E "passed|failed" "$OUT/$1.log" | tail -1)"
  grep -E "^E  +AssertionError" "$OUT/$1.log" | head -8
}
steady own
[ "${FOOTPRINTS:-1}" = 0 ] && exit 0
cp perf_tests/conftest.py /tmp/conftest.py && cat docs/ab-check/footprint_conftest.py >> perf_tests/conftest.py
FOOTPRINT_MIB=16384 FOOTPRINT_AT=collection steady footprint-collection
FOOTPRINT_MIB=16384 steady footprint-import
cp /tmp/conftest.py perf_tests/conftest.py
