"""TFLOP/s of the forward as ``flash_attention_gluon.forward`` dispatches it (``tiles_for``) against
SDPA cuDNN, bf16 H16, B*N = 16,384, D64 causal at N 2,048 to 16,384 and a few D64/D128 cases, with
o's largest error against float32 SDPA (``do_bench`` medians, L2 cleared). It imports ``kernels/``
from the working directory, so an A/B of two versions of the kernel runs it in one tree, copying
each version's ``kernels/flash_attention_gluon.py`` in turn (h200-2026-11-29/masked_block_ab.txt).

    python docs/kernels/gluon_fwd_lengths.py    # from the repo root, on an H100 or H200, ~30 s
"""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

sys.path.insert(0, str(Path.cwd()))
from kernels import flash_attention as fa  # noqa: E402
from kernels import flash_attention_gluon as fg  # noqa: E402

HEADS, TOKENS = 16, 16384
#: (head dim, causal, N)
CASES = ((64, True, 2048), (64, True, 4096), (64, True, 8192), (64, True, 16384), (64, False, 4096),
         (128, True, 4096), (128, False, 4096), (128, True, 16384))


def tflops(fn, flops: float) -> float:
    return flops / do_bench(fn, warmup=20, rep=100) / 1e9


for d, causal, n in CASES:
    b = TOKENS // n
    q, k, v = fa.make_inputs((b, HEADS, n, d), torch.bfloat16, "cuda")
    flops = fa.cost(q.shape, q.dtype, causal)[1]
    o, _ = fg.forward(q, k, v, causal)
    err = (o.float() - F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)).abs().max()
    gluon = tflops(lambda: fg.forward(q, k, v, causal), flops)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        cudnn = tflops(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), flops)
    print(f"D{d} {'causal' if causal else 'full'} N{n}: gluon {gluon:6.1f} cudnn {cudnn:6.1f} ratio {gluon / cudnn:.3f} "
          f"err {err.item():.1e} nan {int(o.isnan().sum())}", flush=True)
    del q, k, v, o
    torch.cuda.empty_cache()
