"""The Gluon forward with exponentials split between the MUFU and the FMA units (``Tiles.exp2_split``:
one in 4 or 8 by a cubic, FlashAttention-4's trick) against the same tiles with MUFU alone and cuDNN:
TFLOP/s (do_bench medians, L2 cleared), o's largest difference from the MUFU-only tiles' and from
float32 SDPA, and NaN counts. bf16, H16, B*N = 16,384; D64 causal at N 2,048 / 4,096 / 8,192, D64 full
and D128 causal and full at N 4,096.

    python docs/kernels/gluon_exp2_check.py    # an H100 or H200, ~1 minute
"""
import dataclasses
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kernels import flash_attention as fa  # noqa: E402
from kernels import flash_attention_gluon as fg  # noqa: E402

CASES = ((64, True, 2048), (64, True, 4096), (64, True, 8192), (64, False, 4096), (128, True, 4096),
         (128, False, 4096))
SPLITS = (0, 4, 8)
TOKENS = 16_384
HEADS = 16

for head_dim, causal, n in CASES:
    b = TOKENS // n
    q, k, v = fa.make_inputs((b, HEADS, n, head_dim), torch.bfloat16, "cuda")
    flops = 4 * b * HEADS * n * n * head_dim / (2 if causal else 1)
    scale = head_dim ** -0.5
    name = f"D{head_dim} {'causal' if causal else 'full'} N{n}"
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        cudnn = do_bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), warmup=20, rep=100)
    exact = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    base = fg.tiles_for(head_dim, causal, n)
    mufu = fg.forward(q, k, v, causal, scale, tiles=base)[0].float()
    line = [f"{name:<20} cuDNN {flops / cudnn / 1e9:6.1f}"]
    for split in SPLITS:
        tiles = dataclasses.replace(base, exp2_split=split)
        o = fg.forward(q, k, v, causal, scale, tiles=tiles)[0].float()
        ms = do_bench(lambda: fg.forward(q, k, v, causal, scale, tiles=tiles), warmup=20, rep=100)
        line.append(f"split {split}: {flops / ms / 1e9:6.1f} ({cudnn / ms:.3f}x) diff {(o - mufu).abs().max().item():.1e}"
                    f" err {(o - exact).abs().max().item():.1e} nan {int(o.isnan().sum())}")
    print("  ".join(line), flush=True)
