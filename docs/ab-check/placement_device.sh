#!/usr/bin/env bash
# One device command on a two-GPU machine: the two calls that read 5-7% above the H100 baseline on a
# fresh two-GPU H100 machine, in fresh pytest processes alternating between its GPUs (machine or
# chip against process), then placement_probe.py on each GPU (placement within a process).
set -uo pipefail
. docs/ab-check/setup.sh
nvidia-smi -q | grep -E "Product Name|VBIOS|Serial|Memory  *:|Max Clocks" -A0 >> "$OUT/gpu.txt"
K="(test_softmax and 4x262144) or (test_attention_bwd and B1H2N128D64)"
for i in 1 2 3 4 5 6; do
  g=$(( i % 2 ))
  CUDA_VISIBLE_DEVICES=$g timeout 100 python -m pytest perf_tests/test_softmax.py perf_tests/test_attention.py -k "$K" \
    --gpuperf --gpuperf-json="$OUT/p$i-g$g.json" -q -p no:randomly > "$OUT/p$i-g$g.log" 2>&1
  echo "process $i gpu $g rc=$? $(( $(date +%s) - S )) s"; grep -E "measured:" "$OUT/p$i-g$g.log"
  grep -E "cuda-float32-4x262144|torch_efficient-bfloat16-causal-B1H2N128D64" "$OUT/p$i-g$g.log" | grep -v FAILED
done
for g in 0 1; do
  CUDA_VISIBLE_DEVICES=$g PYTHONPATH=. timeout 90 python docs/ab-check/placement_probe.py 6 2>&1 | grep -v Warn | tee "$OUT/placement-g$g.log"
done
