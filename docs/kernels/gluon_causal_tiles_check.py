"""Causal Gluon forward tiles whose programs hold several masked key blocks (more rows than keys a
block: three 64-row consumers, or 64-key blocks), where each consumer stops at the block of its last
row and passes the rest on unread, against the two-consumer default tiles and cuDNN: TFLOP/s (do_bench medians, L2
cleared) and the largest differences of o and lse from the default tiles'. H16, B*N = 16,384, bf16.

    python docs/kernels/gluon_causal_tiles_check.py     # an H100 or H200, ~1 min
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

SHAPES = ((8, 16, 2048), (4, 16, 4096), (2, 16, 8192), (1, 16, 16384))
#: per head dim: variant -> changes to the default tiles
VARIANTS = {
    64: {"c3 n128 s3": dict(consumers=3, consumer_regs=160), "c3 n64 s4": dict(consumers=3, consumer_regs=160,
                                                                               block_n=64, stages=4),
         "c2 n64 s4": dict(block_n=64, stages=4), "c2 n64 s6": dict(block_n=64, stages=6)},
    128: {"c2 n64 s3": dict(block_n=64, stages=3), "c2 n64 s4": dict(block_n=64, stages=4)},
}


def tflops(fn, flops):
    return flops / do_bench(fn, warmup=20, rep=100) / 1e9


for d, variants in VARIANTS.items():
    for b, h, n in SHAPES:
        q, k, v = fa.make_inputs((b, h, n, d), torch.bfloat16, "cuda")
        scale, flops = d ** -0.5, 4 * b * h * n * n * d / 2
        default = fg.default_tiles(d)  # two consumers (tiles_for picks three for D64 from N 8,192)
        o, lse = fg.forward(q, k, v, True, scale, tiles=default)
        cells = [f"default {tflops(lambda: fg.forward(q, k, v, True, scale, tiles=default), flops):.0f}"]
        for name, changes in variants.items():
            tiles = dataclasses.replace(default, **changes)
            try:
                o2, lse2 = fg.forward(q, k, v, True, scale, tiles=tiles)
                diff = f"o {(o2.float() - o.float()).abs().max().item():.0e} lse {(lse2 - lse).abs().max().item():.0e}"
                cells.append(f"{name} {tflops(lambda: fg.forward(q, k, v, True, scale, tiles=tiles), flops):.0f}"
                             f" ({diff})")
            except Exception as exc:  # noqa: BLE001 - one variant's failure must not end the run
                cells.append(f"{name} failed: {str(exc).splitlines()[0][:80]}")
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            cells.append(f"cudnn {tflops(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), flops):.0f}")
        print(f"B{b} H{h} N{n} D{d} causal: " + ", ".join(cells), flush=True)
        del q, k, v, o, lse
        torch.cuda.empty_cache()
