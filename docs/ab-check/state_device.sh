#!/usr/bin/env bash
# On a freshly started machine: what sets a process's graph-timed state (docs/gate.md, "Graph-timed
# calls move together between processes")? Times four small graph-timed tests in processes that
# differ in what ran before them in the same process, and prints their medians (µs).
set -uo pipefail
. docs/ab-check/setup.sh
SUB='test_elu and (triton or cuda) and (64x64 or 1000x1001) and float32'
t() {  # label, then pytest args; prints the four medians
  local label=$1; shift
  echo "$label: $(timeout 300 python -m pytest "$@" --gpuperf --gpuperf-no-compare -q -p no:randomly 2>&1 \
    | grep -E '^ +(triton|cuda)-float32-(64x64|1000x1001) ' | awk '{print $1"="$2}' | tr '\n' ' ')"
}
t "alone, first" perf_tests/test_elementwise.py -k "$SUB"
t "alone, second" perf_tests/test_elementwise.py -k "$SUB"
t "after the elementwise file's float32 tests" perf_tests/test_elementwise.py -k "float32"
t "alone, after that" perf_tests/test_elementwise.py -k "$SUB"
t "after attention (large allocations first)" perf_tests/test_attention.py perf_tests/test_elementwise.py \
  -k "(test_attention_fwd and triton and bfloat16 and B4H16N4096) or ($SUB)"
PYTORCH_NO_CUDA_MEMORY_CACHING=1 t "alone, no caching allocator" perf_tests/test_elementwise.py -k "$SUB"
cat docs/ab-check/alloc_conftest.py >> perf_tests/conftest.py
t "alone, 136 MiB held from the start" perf_tests/test_elementwise.py -k "$SUB"
git checkout -q -- perf_tests/conftest.py
t "alone, warm cache mode" perf_tests/test_elementwise.py -k "$SUB" --gpuperf-cache warm
