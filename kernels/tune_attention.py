"""Time each candidate launch config of the Triton FlashAttention, forced, with gpu_benchmark's timer.

    python -m kernels.tune_attention [--shape 4,16,4096] [--head-dims 64,128] [--out sweep.json]

On a GPU: B4 H16 N4096 bf16 (or --shape B,H,N), head dims 64 and 128, full and causal, forward and backward; prints
TFLOP/s per config (the cost model of flash_attention.cost). The tables FWD_CONFIGS / BWD_CONFIGS in
flash_attention.py come from this sweep; a config that fails to compile prints its error instead.
"""
from __future__ import annotations

import argparse
import math

import torch

from kernels import flash_attention as fa
from kernels import tuning
from pytest_gpuperf.measure.timer import TimingConfig

FWD_CANDIDATES = [(256, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 2)]
BWD_CANDIDATES = [(64, 128, 128, 64, 8, 3), (64, 128, 128, 64, 8, 2), (64, 128, 128, 64, 8, 4),
                  (32, 128, 128, 32, 8, 3), (64, 64, 64, 64, 4, 3), (32, 64, 64, 32, 4, 3)]


def _tflops(flops: int, run, config: TimingConfig, inputs) -> float | str:
    ms = tuning.median_ms(run, config, inputs)
    return round(flops / ms / 1e9, 1) if isinstance(ms, float) else ms


def sweep(shape=(4, 16, 4096), dtype=torch.bfloat16, head_dims=(64, 128)) -> dict[str, float | str]:
    config = TimingConfig(budget_s=0.4)
    results: dict[str, float | str] = {}
    for d in head_dims:
        full_shape = (*shape, d)
        q, k, v = fa.make_inputs(full_shape, dtype, "cuda")
        do = fa.make_grad_output(full_shape, dtype, "cuda")
        scale = 1 / math.sqrt(d)
        for causal in (False, True):
            mask = "causal" if causal else "full"
            flops = fa.cost(full_shape, dtype, causal)[1]
            for values in FWD_CANDIDATES:
                meta = dict(zip(fa.FWD_FIELDS, values))
                results[f"fwd D{d} {mask} {values}"] = _tflops(
                    flops, lambda: fa.triton_forward(q, k, v, causal, scale, config=meta), config, (q,))
            o, lse = fa.triton_forward(q, k, v, causal, scale)
            flops = fa.cost(full_shape, dtype, causal, backward=True)[1]
            for values in BWD_CANDIDATES:
                meta = dict(zip(fa.BWD_FIELDS, values))
                results[f"bwd D{d} {mask} {values}"] = _tflops(
                    flops, lambda: fa.triton_backward(q, k, v, o, lse, do, causal, scale, config=meta), config, (q,))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="4,16,4096", help="B,H,N (default 4,16,4096)")
    parser.add_argument("--head-dims", default="64,128", help="comma-separated head dims (default 64,128)")
    parser.add_argument("--out", help="also write the results as JSON here")
    args = parser.parse_args()
    shape = tuning.int_tuple(parser, "--shape", args.shape, 3)
    head_dims = tuning.int_tuple(parser, "--head-dims", args.head_dims)
    results = sweep(shape, head_dims=head_dims)
    for name, value in results.items():
        print(f"{name:48s} {value}")
    tuning.save(results, args.out)


if __name__ == "__main__":
    main()
