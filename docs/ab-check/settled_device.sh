#!/usr/bin/env bash
# Does mapping and freeing a large footprint before the first measurement (measure/footprint.py) put
# a small process in the state of a whole-suite one? The four small ELU cases of footprint_device.sh
# with the footprint on and off; medians in µs. Run first on a fresh machine, the first line is also
# the machine's first pytest process (its node-gap child, if any, runs ahead of it).
set -uo pipefail
. docs/ab-check/setup.sh
SUB='test_elu and (triton or cuda) and (64x64 or 1000x1001) and float32'
t() {
  local label=$1; shift
  echo "$label: $(timeout 200 python -m pytest perf_tests/test_elementwise.py -k "$SUB" --gpuperf --gpuperf-no-compare -q "$@" \
    -p no:randomly 2>&1 | grep -E '^ +(triton|cuda)-float32-(64x64|1000x1001) ' | awk '{print $1"="$2}' | tr '\n' ' ')"
}
t "alone"
GPUPERF_FOOTPRINT=0 t "alone, footprint off"
t "alone, again"
