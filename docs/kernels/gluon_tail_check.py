"""The Gluon forward's ragged program (three 64-row consumers at a length that is not a multiple of
192), with its idle consumers skipped and, causal, placed at the sequence's start
(``Tiles.skip_idle``, the default) against the last program computing them (off), beside the
two-consumer tiles and cuDNN, in one process: TFLOP/s (do_bench medians, L2 cleared), o's and lse's
largest difference between on and off, NaN counts. bf16, H16, B*N = 16,384.

    python docs/kernels/gluon_tail_check.py    # an H100 or H200, ~1 min
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

HEAD_DIM, HEADS, TOKENS = 64, 16, 16384
#: (causal, N): none a multiple of 192, so one program is ragged
CASES = ((False, 4096), (False, 8192), (True, 2048), (True, 4096), (True, 8192), (True, 16384))


def tflops(fn, flops):
    return f"{flops / do_bench(fn, warmup=20, rep=100) / 1e9:6.1f}"


for causal, n in CASES:
    b = TOKENS // n
    q, k, v = fa.make_inputs((b, HEADS, n, HEAD_DIM), torch.bfloat16, "cuda")
    flops = fa.cost(q.shape, q.dtype, causal)[1]
    scale = HEAD_DIM ** -0.5
    assert n % fg.D64_WIDE_TILES.rows
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        line = [f"D{HEAD_DIM} {'causal' if causal else 'full'} B{b} N{n}: cuDNN "
                + tflops(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), flops)]
    two = fg.default_tiles(HEAD_DIM)
    line.append("two consumers " + tflops(lambda: fg.forward(q, k, v, causal, scale, tiles=two), flops))
    out = {}
    for skip in (False, True):
        tiles = dataclasses.replace(fg.D64_WIDE_TILES, skip_idle=skip)
        out[skip] = fg.forward(q, k, v, causal, scale, tiles=tiles)
        line.append(f"three, skip {'on ' if skip else 'off'} "
                    + tflops(lambda: fg.forward(q, k, v, causal, scale, tiles=tiles), flops))
    (o0, l0), (o1, l1) = out[False], out[True]
    line.append(f"o diff {(o0.float() - o1.float()).abs().max().item():.1e} lse diff {(l0 - l1).abs().max().item():.1e} "
                f"nan {int(o1.isnan().sum()) + int(l1.isnan().sum())}")
    print("  ".join(line), flush=True)
    del q, k, v, out, o0, o1, l0, l1
    torch.cuda.empty_cache()
