#!/usr/bin/env bash
# Does a large GPU footprint alone set a process's graph-timed state (docs/measurement.md, "Processes
# differ by a constant per graph-timed call")? The four small ELU cases of state_device.sh, timed in
# processes that first fill, keep or free a footprint (footprint_conftest.py); medians in µs.
set -uo pipefail
. docs/ab-check/setup.sh
SUB='test_elu and (triton or cuda) and (64x64 or 1000x1001) and float32'
t() {
  echo "$1: $(timeout 200 python -m pytest perf_tests/test_elementwise.py -k "$SUB" --gpuperf --gpuperf-no-compare -q \
    -p no:randomly 2>&1 | grep -E '^ +(triton|cuda)-float32-(64x64|1000x1001) ' | awk '{print $1"="$2}' | tr '\n' ' ')"
}
cat docs/ab-check/footprint_conftest.py >> perf_tests/conftest.py
t "alone"
FOOTPRINT_MIB=2048 t "2 GiB held"
FOOTPRINT_MIB=16384 t "16 GiB held"
FOOTPRINT_MIB=16384 FOOTPRINT_FREE=1 t "16 GiB freed to the caching allocator"
FOOTPRINT_MIB=16384 FOOTPRINT_FREE=2 t "16 GiB freed and the cache emptied"
t "alone, again"
git checkout -q -- perf_tests/conftest.py
