"""The D64 forward without a mask at N 2,048 to 16,384: the three-consumer tiles the Gluon kernel
runs there (flash_attention_gluon.D64_WIDE_TILES) against its two-consumer tiles and the Triton
kernel, TFLOP/s (do_bench medians, L2 cleared) and o's largest difference from the two-consumer one's.

    python docs/kernels/gluon_d64_check.py     # an H100 or H200, ~30 s
"""
import sys
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kernels import flash_attention as fa  # noqa: E402
from kernels import flash_attention_gluon as fg  # noqa: E402

SHAPES = ((8, 16, 2048), (4, 16, 4096), (2, 16, 8192), (1, 16, 16384))
for b, h, n in SHAPES:
    q, k, v = fa.make_inputs((b, h, n, 64), torch.bfloat16, "cuda")
    scale, flops = 0.125, 4 * b * h * n * n * 64
    runs = {"three": lambda: fg.forward(q, k, v, False, scale, tiles=fg.D64_WIDE_TILES),
            "two": lambda: fg.forward(q, k, v, False, scale, tiles=fg.default_tiles(64)),
            "triton": lambda: fa.triton_forward(q, k, v, False, scale, use_tma=True)}
    ref = runs["two"]()[0]
    cells = []
    for name, run in runs.items():
        diff = (run()[0].float() - ref.float()).abs().max().item()
        ms = do_bench(run, warmup=20, rep=80)
        cells.append(f"{name} {flops / ms / 1e9:.1f} (diff {diff:.1e})")
    print(f"B{b} H{h} N{n} D64 full: " + ", ".join(cells), flush=True)
