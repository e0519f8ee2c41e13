#!/usr/bin/env bash
# Does the node-gap child (measure/node_gap.py, which a process starts when the gap is not cached)
# set its parent's graph-timed state? The four small ELU cases of footprint_device.sh, each process
# holding 16 GiB from the start, with the gap cached or its cache removed; medians in µs. Then, if
# given, the remaining arguments run as one more command (an A/B on the same machine).
set -uo pipefail
. docs/ab-check/setup.sh
SUB='test_elu and (triton or cuda) and (64x64 or 1000x1001) and float32'
CACHE=${GPUPERF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pytest-gpuperf}/node-gap.json
t() {
  local label=$1; shift
  echo "$label: $(FOOTPRINT_MIB=16384 timeout 200 python -m pytest perf_tests/test_elementwise.py -k "$SUB" --gpuperf \
    --gpuperf-no-compare -q -p no:randomly 2>&1 | grep -E '^ +(triton|cuda)-float32-(64x64|1000x1001) ' \
    | awk '{print $1"="$2}' | tr '\n' ' ')" | tee -a "$OUT/child.txt"
}
cat docs/ab-check/footprint_conftest.py >> perf_tests/conftest.py
t "16 GiB held, the machine's first process, gap cached: $([ -f "$CACHE" ] && echo yes || echo no)"
t "16 GiB held, gap cached"
rm -f "$CACHE"; t "16 GiB held, gap cache removed (a child measures it)"
t "16 GiB held, gap cached again"
rm -f "$CACHE"; t "16 GiB held, gap cache removed again"
git checkout -q -- perf_tests/conftest.py
[ $# -gt 0 ] && "$@"
