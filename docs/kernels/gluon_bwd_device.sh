#!/usr/bin/env bash
# Device script (issue 47): the Gluon Hopper attention backward (kernels/flash_attention_gluon_bwd.py) on an
# H100/H200, from the repo root after `python -m pip install -q --no-deps --no-build-isolation -e .`:
#   bash docs/kernels/gluon_bwd_device.sh
# Checks dq, dk, dv against kernels.flash_attention.triton_backward (and float32 SDPA autograd at the
# small shape) at B2 H4 N1024 and B4 H16 N4096, D64/D128, full/causal, bf16, for the TMA reduce-add
# and the atomic dQ variants; then times the backward at B4 H16 N4096: both variants, the Triton
# backward and cuDNN (SDPA's backward alone). Each (D, causal) case runs in a child process with a
# time limit, so a compile error or a hang costs that case only. ~2-3 minutes. Writes
# $OUT/results.json and $OUT/bench.txt. Registers, spills and shared memory need no GPU:
# `python docs/kernels/gluon_bwd_bench.py --compile-only`.
set -uo pipefail
OUT=${OUT:-scratch/gluon_bwd}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
python docs/kernels/gluon_bwd_bench.py --out "$OUT" 2>&1 | tee "$OUT/bench.txt"
