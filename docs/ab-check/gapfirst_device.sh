#!/usr/bin/env bash
# The plugin measures the node gap (its child process) before the process makes a CUDA context. Does
# a process that had to measure it now read graph-timed calls as one that found it cached? Also: when
# does torch make a context (NVML's list of compute processes). Medians of the four small ELU cases
# after one large attention forward, in µs. Remaining arguments run as one more command.
set -uo pipefail
. docs/ab-check/setup.sh
python - <<'PY' | tee -a "$OUT/gapfirst.txt"
import os, pynvml, torch
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
ctx = lambda: sorted(p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h))
print("pid", os.getpid(), "import", ctx()); torch.cuda.is_available(); print("is_available", ctx())
torch.cuda.get_device_properties(0); print("get_device_properties", ctx())
torch.cuda.current_device(); print("current_device", ctx())
torch.cuda.set_device(0); print("set_device", ctx())
torch.empty(1, device="cuda"); print("allocation", ctx())
PY
SUB='test_elu and (triton or cuda) and (64x64 or 1000x1001) and float32'
CACHE=${GPUPERF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pytest-gpuperf}/node-gap.json
t() {
  local label=$1; shift
  echo "$label: $(timeout 200 python -m pytest perf_tests/test_attention.py perf_tests/test_elementwise.py --gpuperf \
    -k "(test_attention_fwd and triton and bfloat16 and B4H16N4096) or ($SUB)" --gpuperf-no-compare -q -p no:randomly 2>&1 \
    | grep -E '^ +(triton|cuda)-float32-(64x64|1000x1001) ' | awk '{print $1"="$2}' | tr '\n' ' ')" | tee -a "$OUT/gapfirst.txt"
}
rm -f "$CACHE"; t "after attention, gap measured first"
t "after attention, gap cached"
rm -f "$CACHE"; t "after attention, gap measured first, again"
cat docs/ab-check/footprint_conftest.py >> perf_tests/conftest.py
rm -f "$CACHE"; FOOTPRINT_MIB=16384 t "16 GiB held from conftest import, gap measured"
git checkout -q -- perf_tests/conftest.py
[ $# -gt 0 ] && "$@"
