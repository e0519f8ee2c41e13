"""The D64 causal forward with two programs an SM: 64-key tiles, 104 registers a consumer thread and
a launch bound of 80 (``Tiles.launch_regs``), so that one program's start and end overlap another's
loop, against the default tiles (one program an SM) and cuDNN; TFLOP/s (do_bench medians, L2
cleared) and o's largest difference from the default tiles'. N 2,048 to 8,192, B*N = 16,384, H16.

    python docs/kernels/gluon_two_cta_check.py VARIANT   # one of VARIANTS; an H100 or H200, ~10 s each
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

#: variant -> changes to the default D64 tiles; None: cuDNN
VARIANTS = {
    "default": {},
    "2cta n64 s2 r104": dict(block_n=64, stages=2, consumer_regs=104, launch_regs=80),
    "2cta n64 s3 r104": dict(block_n=64, stages=3, consumer_regs=104, launch_regs=80),
    "2cta n64 s4 r104": dict(block_n=64, stages=4, consumer_regs=104, launch_regs=80),
    "cudnn": None,
}
SHAPES = ((8, 16, 2048), (4, 16, 4096), (2, 16, 8192))
HEAD_DIM = 64

name = sys.argv[1]
for b, h, n in SHAPES:
    q, k, v = fa.make_inputs((b, h, n, HEAD_DIM), torch.bfloat16, "cuda")
    flops, scale = 4 * b * h * n * n * HEAD_DIM / 2, HEAD_DIM ** -0.5
    diff = 0.0
    if VARIANTS[name] is None:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            ms = do_bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), warmup=20, rep=100)
    else:
        tiles = dataclasses.replace(fg.default_tiles(HEAD_DIM), **VARIANTS[name])
        reference = fg.forward(q, k, v, True, scale, tiles=fg.default_tiles(HEAD_DIM))[0].float()
        diff = (fg.forward(q, k, v, True, scale, tiles=tiles)[0].float() - reference).abs().max().item()
        ms = do_bench(lambda: fg.forward(q, k, v, True, scale, tiles=tiles), warmup=20, rep=100)
    print(f"{name:<20} D{HEAD_DIM} causal N{n:<6} {flops / ms / 1e9:7.1f} TFLOP/s  diff {diff:.1e}", flush=True)
