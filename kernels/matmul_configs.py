"""What the Triton matmul (kernels/matmul_triton.py) chooses its launch config from: the config tables
per kernel, dtype and precision, the pruning of a table for one launch, and the picks per GPU model
(kernels/matmul_picks.yaml) that replace autotuning where one is recorded. Why these tables and
picks: docs/kernels/matmul.md, "Config tables" and "Autotuning".
"""
from __future__ import annotations

import functools
from pathlib import Path

import triton
import triton.testing
import yaml

# ---- configs ----------------------------------------------------------------------------------
# TMA kernel: (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps, EPILOGUE_SPLIT, WARP_SPECIALIZE),
# per (operand dtype, precision); every entry fits sm_90a's registers and shared memory
# (docs/kernels/matmul.md, "Config tables"). 128x256 stages of 48 KiB for large shapes, 128x128
# for few tiles, 64-row tiles only where M <= 64; fp32 "ieee" has no tensor-core path.
TMA_TABLE: dict[tuple[str, str], list[tuple]] = {
    ("16", "ieee"): [
        (128, 256, 64, 3, 8, 2, False),
        (128, 256, 64, 4, 8, 2, False),
        (128, 128, 64, 4, 8, 1, False),
        (64, 256, 64, 4, 4, 2, False),
        (64, 128, 128, 4, 4, 1, False),
    ],
    ("fp32", "tf32"): [  # B_T: see matmul_triton._matmul_tma_kernel
        (128, 256, 32, 3, 8, 2, False),
        (128, 128, 32, 5, 8, 2, False),
        (128, 128, 64, 3, 8, 2, False),
        (64, 128, 32, 4, 4, 1, False),
    ],
    ("fp32", "tf32-swap"): [  # SWAP_AB: the TF32 configs of the earlier register-operand kernel
        (128, 128, 32, 4, 8, 2, False),
        (128, 256, 32, 3, 8, 2, False),
        (128, 128, 32, 4, 4, 2, False),
        (64, 128, 64, 4, 4, 1, False),
    ],
    ("fp32", "ieee"): [
        (128, 128, 32, 3, 8, 2, False),
        (64, 128, 32, 3, 4, 2, False),
    ],
}
# Warp-specialized forms: kept out of autotuning, which hung with them in the list
# (docs/kernels/matmul.md); pass one as config=. perf_tests/test_matmul.py checks them under the interpreter.
EXPERIMENTAL_WS_CONFIGS: list[tuple] = [
    (128, 256, 64, 3, 4, 1, True),
    (128, 256, 64, 4, 4, 1, True),
    (128, 128, 64, 4, 4, 1, True),
]

# Pointer kernel (unaligned strides, pre-Hopper): BLOCK_K=32 keeps unvectorized (unaligned)
# loads from spilling (each element then carries its own 64-bit address through the pipeline).
PTR_TABLE: dict[tuple[str, str], list[tuple]] = {
    ("16", "ieee"): [(128, 128, 32, 3, 8), (128, 128, 32, 4, 8), (64, 128, 32, 3, 4)],
    ("fp32", "tf32"): [(128, 128, 32, 3, 8), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4)],
    ("fp32", "ieee"): [(128, 128, 32, 3, 8), (128, 64, 32, 3, 8), (64, 64, 32, 3, 4)],
}
TMA_FIELDS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "EPILOGUE_SPLIT",
               "WARP_SPECIALIZE")
PTR_FIELDS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps")


def table_key(dtype_key: str, precision: str, swap_ab: bool = False) -> tuple[str, str]:
    if dtype_key != "fp32":
        return ("16", "ieee")
    return ("fp32", "tf32-swap") if swap_ab else ("fp32", precision)


def set_tma_blocks(nargs):
    """Pre-hook: give the host-side descriptors the block shapes of the config being run."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if nargs["B_T"] else [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn // nargs["EPILOGUE_SPLIT"]]


def make_config(fields, values, pre_hook=None) -> triton.Config:
    kw = dict(zip(fields, values))
    stages, warps = kw.pop("num_stages"), kw.pop("num_warps")
    kw["GROUP_M"] = 8
    return triton.Config(kw, num_stages=stages, num_warps=warps, pre_hook=pre_hook)


def config_id(cfg: triton.Config, fields) -> tuple:
    kw = dict(cfg.kwargs, num_stages=cfg.num_stages, num_warps=cfg.num_warps)
    return tuple(kw[f] for f in fields)


def competing(fields, values: list[tuple], m: int, split_by_m: bool) -> list[tuple]:
    """The configs (field tuples) that compete for one launch; with split_by_m, 64-row tiles
    exactly when M <= 64 (the pointer kernel lets all compete: docs/kernels/matmul.md, "Autotuning")."""
    if not split_by_m:
        return values
    kept = [v for v in values if (dict(zip(fields, v))["BLOCK_M"] == 64) == (m <= 64)]
    return kept or values


# ---- picks: one config per GPU model and launch, used instead of autotuning -------------------
# The autotuner's pick for one launch varied between processes on one H100 (Triton fp16 4096 read
# 187 µs in one process, 202 and 213 µs in two others), and a gate cannot tell that from a change
# to the code. `python -m kernels.tune_matmul --write` times every candidate with gpu_benchmark's
# timer and records the fastest here; launches without a pick are autotuned as before.
PICKS_PATH = Path(__file__).with_name("matmul_picks.yaml")


def pick_key(kernel: str, m: int, n: int, k: int, dtype_key: str, precision: str, b_t: bool = False,
             swap_ab: bool = False) -> str:
    """The picks file's name for one launch: kernel, shape, operand dtype, precision and B's form."""
    return f"{kernel} {m}x{n}x{k} {dtype_key} {precision}" + (" b_t" if b_t else "") + (" swap_ab" if swap_ab else "")


@functools.cache
def picks(device_index: int) -> dict[str, tuple]:
    """This GPU model's picks (an empty table on a model without any)."""
    from pytest_gpuperf.measure.device import describe

    if not PICKS_PATH.exists():
        return {}
    table = yaml.safe_load(PICKS_PATH.read_text()) or {}
    return {key: tuple(v) for key, v in (table.get(describe(device_index)["key"]) or {}).items()}


def pruner(table, fields, kernel: str, split_by_m: bool = True):
    def prune(configs, nargs, **kwargs):
        """This dtype/precision's configs that may compete for this launch, or only its pick."""
        ids = [config_id(c, fields) for c in configs]
        wanted = set(table[table_key(kwargs["DTYPE"], kwargs["PRECISION"], kwargs.get("SWAP_AB", False))])
        values = competing(fields, [v for v in ids if v in wanted], nargs["M"], split_by_m)
        key = pick_key(kernel, nargs["M"], nargs["N"], nargs["K"], kwargs["DTYPE"], kwargs["PRECISION"],
                       kwargs.get("B_T", False), kwargs.get("SWAP_AB", False))
        picked = picks(nargs["c_ptr"].device.index or 0).get(key)
        if picked in values:
            values = [picked]
        return [c for c, v in zip(configs, ids) if v in values]
    return prune


def autotune_bench(kernel_call, quantiles):
    """Each config timed as a CUDA graph of back-to-back calls (medians), so that launch jitter of a
    few-µs GEMM does not decide the pick (docs/kernels/matmul.md, "Autotuning")."""
    return triton.testing.do_bench_cudagraph(kernel_call, rep=5, quantiles=quantiles)


def unique(table) -> list[tuple]:
    """Every config of `table` once, in table order (the autotuner's list)."""
    return list(dict.fromkeys(v for entries in table.values() for v in entries))

