"""Time launch configs of the memory-bound Triton kernels (ELU, GeLU, softmax), forced, with gpu_benchmark's timer.

    python -m kernels.tune_streaming [--size 16384,16384] [--dtypes float32,bfloat16]
                                     [--kernels elementwise,softmax] [--out sweep.json]

On a GPU: for each dtype, the copy bandwidth (a device-to-device copy of the same bytes) and the
built-in, torch.compile and CUDA impls as references, then every candidate config of the Triton
ELU, GeLU (tanh and erf) and softmax; prints ms and % of the copy's GB/s per config. The defaults
in common.launch_elementwise and softmax.rows_config / long_config come from this sweep.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from kernels import common, elu, gelu, softmax, tuning
from pytest_gpuperf.measure.timer import TimingConfig

#: (BLOCK in bytes of input per program, num_warps, load eviction policy)
ELEMENTWISE = [(b, w, e) for b, w in [(2048, 2), (2048, 4), (4096, 2), (4096, 4), (8192, 4), (8192, 8),
                                      (16384, 8), (32768, 8)]
               for e in ("evict_first", "")]
#: the one-pass row kernel: (num_warps, programs per SM (0: one program per row block), eviction)
SOFTMAX_ROWS = [(w, 0, e) for w in (8, 16, 32) for e in ("evict_first", "")] + [(16, 2, "")]
#: the online two-pass kernel, on rows of any length: (BLOCK, num_warps, first-pass / second-pass eviction)
SOFTMAX_TILED = [(b, w, keep, drop) for b, w in [(2048, 16), (2048, 32), (4096, 8), (4096, 16), (4096, 32)]
                 for keep, drop in (("", ""), ("evict_last", "evict_first"))]


def _references(kernels: tuple[str, ...]) -> dict[str, tuple[Callable, ...]]:
    """(torch, compiled, cuda) impls of each kernel family asked for."""
    refs = {
        "elu": (elu.torch_builtin, elu.compiled, elu.cuda_elu),
        "gelu-tanh": (lambda t: gelu.torch_builtin(t, "tanh"), lambda t: gelu.compiled(t, "tanh"),
                      lambda t: gelu.cuda_gelu(t, "tanh")),
        "gelu-erf": (lambda t: gelu.torch_builtin(t, "erf"), lambda t: gelu.compiled(t, "erf"),
                     lambda t: gelu.cuda_gelu(t, "erf")),
        "softmax": (softmax.torch_builtin, softmax.compiled, softmax.cuda_softmax),
    }
    return {k: v for k, v in refs.items() if ("softmax" if k == "softmax" else "elementwise") in kernels}


def sweep(size=(16384, 16384), dtypes=("float32", "bfloat16"),
          kernels=("elementwise", "softmax")) -> dict[str, float | str]:
    config = TimingConfig(budget_s=0.3)
    results: dict[str, float | str] = {}
    sms = common.sm_count(torch.device("cuda"))
    rows, cols = size
    for name in dtypes:
        dt = getattr(torch, name)
        x = common.randn_input(size, dt, "cuda")
        dst = torch.empty_like(x)
        results[f"{name} copy"] = tuning.median_ms(lambda: dst.copy_(x), config, (x,))
        for kernel, fns in _references(kernels).items():
            for impl, fn in zip(("torch", "compiled", "cuda"), fns):
                results[f"{name} {kernel} {impl}"] = tuning.median_ms(lambda fn=fn: fn(x), config, (x,))
        if "elementwise" in kernels:
            for block_bytes, warps, evict in ELEMENTWISE:
                block = block_bytes // x.element_size()
                tag = f"{block_bytes}B w{warps} {evict or 'no-hint'}"
                results[f"{name} elu triton {tag}"] = tuning.median_ms(
                    lambda: elu.triton_elu(x, block=block, num_warps=warps, evict=evict), config, (x,))
                for approx in gelu.APPROXIMATIONS:
                    results[f"{name} gelu-{approx} triton {tag}"] = tuning.median_ms(
                        lambda a=approx: gelu.triton_gelu(x, a, block=block, num_warps=warps, evict=evict),
                        config, (x,))
        if "softmax" not in kernels:
            continue
        results[f"{name} softmax triton default"] = tuning.median_ms(lambda: softmax.triton_softmax(x), config, (x,))
        if cols <= softmax.MAX_ROW_BLOCK:  # short enough for the row kernel: it, and forced tilings
            for warps, per_sm, evict in SOFTMAX_ROWS:
                cfg = dict(softmax.rows_config(rows, cols, sms, per_sm), num_warps=warps, evict=evict)
                results[f"{name} softmax triton rows w{warps} per_sm{per_sm} {evict or 'no-hint'}"] = \
                    tuning.median_ms(lambda cfg=cfg: softmax.triton_softmax(x, config=cfg), config, (x,))
            tiled = [dict(kernel="long", splits=1, slice_len=cols, tiles=-(-cols // b), block=b, num_warps=w,
                          keep=keep, drop=drop) for b, w, keep, drop in SOFTMAX_TILED]
        else:  # the long-row kernel's own choice of splits and tiles, with and without eviction hints
            base = softmax.long_config(rows, cols, sms, False, x.element_size())
            hints = (("", ""), ("evict_last", "evict_first")) if base["tiles"] > 1 else (("", ""),)  # 1 tile: 1 pass
            tiled = [dict(base, kernel="long", keep=keep, drop=drop) for keep, drop in hints]
        for cfg in tiled:
            results[f"{name} softmax triton tiled {cfg['block']}x{cfg['tiles']} split{cfg['splits']} "
                    f"w{cfg['num_warps']} {cfg['keep'] or 'no-hint'}"] = tuning.median_ms(
                lambda cfg=cfg: softmax.triton_softmax(x, config=cfg), config, (x,))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="16384,16384", help="rows,cols (default 16384,16384)")
    parser.add_argument("--dtypes", default="float32,bfloat16", help="comma-separated torch dtype names")
    parser.add_argument("--kernels", default="elementwise,softmax", help="elementwise, softmax or both")
    parser.add_argument("--out", help="also write the results as JSON here")
    args = parser.parse_args()
    size = tuning.int_tuple(parser, "--size", args.size, 2)
    results = sweep(size, tuple(args.dtypes.split(",")), tuple(args.kernels.split(",")))
    copies = {k.split()[0]: v for k, v in results.items() if k.endswith(" copy") and isinstance(v, float)}
    for name, value in results.items():
        copy = copies.get(name.split()[0])
        pct = f"{copy / value * 100:6.1f}% of copy" if isinstance(value, float) and copy else ""
        shown = f"{value:.4f} ms" if isinstance(value, float) else value
        print(f"{name:52s} {shown:>12s} {pct}")
    tuning.save(results, args.out)


if __name__ == "__main__":
    main()
