#!/usr/bin/env bash
# Device script (a four-GPU host), run from the repository root: ab_cost_device.sh on a quarter of
# the suite per GPU, all at once, each in a copy of the working tree of its own (ab_device.sh commits
# in it); the whole suite's A/B cost is the quarters' summed. Each part may take COLD_S + AB_S + WARM_S
# (590 s by default) and a device command 600 s: after a run that filled the caches, WARMED=1.
# PARTS: which parts to run, by index (default "0 1 2 3"), the n-th named on GPU n-1 (a two-GPU host).
set -uo pipefail
parts=("perf_tests/test_attention.py"
       "perf_tests/test_matmul.py"
       "perf_tests/test_elementwise.py"
       "perf_tests/test_softmax.py perf_tests/test_cuda_ext.py perf_tests/test_harness.py perf_tests/test_gate_quality.py perf_tests/test_steady_state.py")
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
export SKIP_INSTALL=1  # one install for all: a reinstall while another part starts Python can break its import
read -r -a chosen <<< "${PARTS:-0 1 2 3}"
for gpu in "${!chosen[@]}"; do
  k=${chosen[$gpu]}
  rm -rf "/tmp/abcost$k" && cp -a . "/tmp/abcost$k"
  mkdir -p "$OUT/part$k"
  ( cd "/tmp/abcost$k" && CUDA_VISIBLE_DEVICES=$gpu OUT="$OUT/part$k" FILES="${parts[$k]}" \
      bash docs/speed-check/ab_cost_device.sh > "$OUT/part$k/summary.txt" 2>&1 ) &
done
wait
cat "$OUT"/part*/summary.txt
for k in "${chosen[@]}"; do tar czf "$OUT/part$k.tgz" -C "$OUT" "part$k" --remove-files; done
