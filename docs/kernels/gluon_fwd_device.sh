#!/usr/bin/env bash
# Device script (issue 47): the Gluon Hopper attention forward (kernels/flash_attention_gluon.py) on an
# H100/H200, from the repo root after `python -m pip install -q --no-deps --no-build-isolation -e .`:
#   bash docs/kernels/gluon_fwd_device.sh          # check and time the default tiles
#   bash docs/kernels/gluon_fwd_device.sh sweep    # tile variants and N 1,024..16,384 (gluon_fwd_sweep.py)
# Default mode: checks o and lse against float32 SDPA and the Triton forward (B2 H4 N1024 and B4 H16
# N4096, D64/D128, full/causal, bf16; the Triton backward fed the Gluon (o, lse) at the small shape),
# then times the forward at B4 H16 N4096: Gluon without and with ping-pong, the Triton kernel, SDPA
# cuDNN. Each (D, causal) case runs in a child process with a time limit, so a compile error or a hang
# costs that case only. ~2-3 minutes (at most ~5 if cases hang). Writes $OUT/results.json and
# $OUT/bench.txt. Sweep mode: ~2 minutes (at most ~4 if children hang); $OUT/sweep.json, $OUT/sweep.txt.
# Registers, spills and shared memory need no GPU: `python docs/kernels/gluon_fwd_bench.py --compile-only`
# (the sweep's variants: `python docs/kernels/gluon_fwd_sweep.py --compile-only`).
set -uo pipefail
OUT=${OUT:-scratch/gluon_fwd}
MODE=${1:-bench}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
case "$MODE" in
  bench) python docs/kernels/gluon_fwd_bench.py --out "$OUT" 2>&1 | tee "$OUT/bench.txt" ;;
  sweep) python docs/kernels/gluon_fwd_sweep.py --out "$OUT" 2>&1 | tee "$OUT/sweep.txt" ;;
  *) echo "gluon_fwd_device.sh: unknown mode '$MODE' (bench or sweep)" >&2; exit 2 ;;
esac
