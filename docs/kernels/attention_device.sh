#!/usr/bin/env bash
# Device script (issue 47): what a GPU model needs for the Hopper attention kernels' figures, in two
# calls of under 10 minutes each, from the repo root after
# `python -m pip install -q --no-deps --no-build-isolation -e .`:
#   bash docs/kernels/attention_device.sh bench   # the Gluon forward and backward against cuDNN (~6 min)
#   bash docs/kernels/attention_device.sh gate    # the project's gate on the attention tests (~3 min)
# bench: gluon_fwd_device.sh (accuracy, B4 H16 N4096 against cuDNN), gluon_bwd_device.sh (the
# backward's variants, N 1,024 to 16,384), gluon_causal_tiles_check.py, gluon_d64_check.py and
# gluon_tail_check.py (three-consumer tiles against two and cuDNN, N 2,048 to 16,384);
# outputs under $OUT/fwd, $OUT/bwd and $OUT/*.txt. gate: `pytest perf_tests/test_attention.py -k
# "triton or (torch_cudnn and N4096)" --gpuperf --gpuperf-counters` against this GPU's committed
# baseline (cuDNN in the same process), $OUT/attn.json (for `gpuperf merge`) and $OUT/attn.log.
set -uo pipefail
OUT=${OUT:-scratch/attention}
MODE=${1:-bench}
HERE=docs/kernels
mkdir -p "$OUT"
case "$MODE" in
  bench)
    OUT=$OUT/fwd bash $HERE/gluon_fwd_device.sh bench > /dev/null 2>&1
    OUT=$OUT/bwd bash $HERE/gluon_bwd_device.sh > /dev/null 2>&1
    timeout 120 python $HERE/gluon_causal_tiles_check.py > "$OUT/causal_tiles.txt" 2>&1
    timeout 120 python $HERE/gluon_d64_check.py > "$OUT/d64.txt" 2>&1
    timeout 120 python $HERE/gluon_tail_check.py > "$OUT/tail.txt" 2>&1
    tail -n 12 "$OUT/fwd/bench.txt" "$OUT/bwd/bench.txt"; cat "$OUT/causal_tiles.txt" "$OUT/d64.txt" "$OUT/tail.txt" ;;
  gate)
    timeout 540 python -m pytest perf_tests/test_attention.py -k "triton or (torch_cudnn and N4096)" --gpuperf \
      --gpuperf-counters -q -p no:randomly -p no:cacheprovider -n 0 --gpuperf-json="$OUT/attn.json" \
      > "$OUT/attn.log" 2>&1
    echo "pytest exit $?"
    grep -E "measured:|passed|failed|counters judged|B4H16N4096" "$OUT/attn.log" ;;
  *) echo "attention_device.sh: unknown mode '$MODE' (bench or gate)" >&2; exit 2 ;;
esac
