#!/usr/bin/env bash
# One device command on a fresh machine: pick the Triton matmul configs (kernels/tune_matmul.py
# --write), time the torch.compile elementwise and softmax cases with Inductor's benchmarking-based
# choices off (compile_probe_conftest.py) in PROBES processes of their own caches, then the whole
# suite (with the picks) against the committed baselines.
set -uo pipefail
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
export PYTHONUNBUFFERED=1
S=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,power.limit,temperature.gpu --format=csv > "$OUT/gpu.txt"
timeout 200 python -m kernels.tune_matmul --rounds 2 --write --out "$OUT/tune.json" > "$OUT/probe.log" 2>&1
echo "tune rc=$? $(( $(date +%s) - S )) s"; cp kernels/matmul_picks.yaml "$OUT/"
cp perf_tests/conftest.py /tmp/conftest.py.orig
cat docs/ab-check/compile_probe_conftest.py >> perf_tests/conftest.py
for i in $(seq 1 "${PROBES:-1}"); do
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) timeout 90 python -m pytest perf_tests --gpuperf -q -p no:randomly \
    -k "compiled and (elu or gelu or softmax)" --gpuperf-json="$OUT/compile-$i.json" >> "$OUT/probe.log" 2>&1
  echo "probe $i rc=$? $(( $(date +%s) - S )) s"
done
cp /tmp/conftest.py.orig perf_tests/conftest.py
if [ "${SUITE:-1}" = 1 ]; then
  REM=$(( 590 - ($(date +%s) - S) )); echo "suite budget $REM s"
  timeout "$REM" python -m pytest perf_tests --gpuperf --gpuperf-json="$OUT/suite.json" -q -p no:randomly > "$OUT/suite.log" 2>&1
  echo "suite rc=$? $(( $(date +%s) - S )) s"
  tail -3 "$OUT/suite.log"
fi
grep -E "pick|passed|failed" "$OUT/probe.log" | cut -c1-200
