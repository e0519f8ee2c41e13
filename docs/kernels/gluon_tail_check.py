"""The Gluon forward's last program when its rows run past N (three 64-row consumers at a length not
a multiple of 192): its consumers past N passing every key block on unread (``Tiles.skip_past_n``,
the default) against computing them (off), in one process: TFLOP/s (do_bench medians, L2 cleared),
o's and lse's largest difference between the two, NaN counts, and cuDNN beside them. bf16, H16.

    python docs/kernels/gluon_tail_check.py    # an H100 or H200, ~30 s
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

#: (head dim, causal, B, N): each N a multiple of 128 but not of 192, so the last program runs past N
CASES = ((64, False, 4, 4096), (64, False, 2, 8192), (64, True, 2, 8192), (64, True, 1, 16384))
HEADS = 16

for head_dim, causal, b, n in CASES:
    q, k, v = fa.make_inputs((b, HEADS, n, head_dim), torch.bfloat16, "cuda")
    flops = 4 * b * HEADS * n * n * head_dim / (2 if causal else 1)
    scale = head_dim ** -0.5
    base = fg.tiles_for(head_dim, causal, n)
    assert base.consumers == 3 and n % base.rows, base
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        cudnn = do_bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), warmup=20, rep=100)
    out, line = {}, [f"D{head_dim} {'causal' if causal else 'full'} B{b} N{n}: cuDNN {flops / cudnn / 1e9:6.1f}"]
    for skip in (False, True):
        tiles = dataclasses.replace(base, skip_past_n=skip)
        out[skip] = fg.forward(q, k, v, causal, scale, tiles=tiles)
        ms = do_bench(lambda: fg.forward(q, k, v, causal, scale, tiles=tiles), warmup=20, rep=100)
        line.append(f"skip {'on ' if skip else 'off'} {flops / ms / 1e9:6.1f} ({cudnn / ms:.3f}x)")
    (o0, l0), (o1, l1) = out[False], out[True]
    line.append(f"o diff {(o0.float() - o1.float()).abs().max().item():.1e} lse diff {(l0 - l1).abs().max().item():.1e} "
                f"nan {int(o1.isnan().sum()) + int(l1.isnan().sum())}")
    print("  ".join(line), flush=True)
