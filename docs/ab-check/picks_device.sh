#!/usr/bin/env bash
# One device command on a fresh machine: pick the Triton matmul configs (kernels/tune_matmul.py
# --write), then time the torch.compile cases and the Triton matmuls against the committed baselines
# in two processes, each with Inductor caches of its own.
set -uo pipefail
. docs/ab-check/setup.sh
timeout 200 python -m kernels.tune_matmul --rounds 2 --write --out "$OUT/tune.json" > "$OUT/probe.log" 2>&1
echo "tune rc=$? $(( $(date +%s) - S )) s"; cp kernels/matmul_picks.yaml "$OUT/"
for i in 1 2; do
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) timeout 150 python -m pytest perf_tests --gpuperf -q -p no:randomly \
    -k "compiled or (test_matmul and triton)" --gpuperf-json="$OUT/subset-$i.json" >> "$OUT/probe.log" 2>&1
  echo "subset $i rc=$? $(( $(date +%s) - S )) s"
done
grep -E "measured:|passed|failed" "$OUT/probe.log" | cut -c1-200
