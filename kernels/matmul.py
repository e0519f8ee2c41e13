"""Matrix multiply C = A @ B: A is M x K, B is K x N (row-major, or K-major: the transpose of a
row-major N x K tensor, like an nn.Linear weight), C (M x N) in the inputs' dtype.

Impls (all take ``(a, b, *, tf32=False)`` and return C):
- ``torch``: ``torch.matmul`` (cuBLAS on CUDA).
- ``compiled``: ``torch.compile`` of ``torch.matmul`` (``dynamic=True``: one graph per dtype).
  Inductor lowers a lone matmul to cuBLAS, so this is cuBLAS plus the compiled wrapper's guards.
- ``triton``: tiled Triton GEMM, fp32 accumulation. On Hopper (sm_90+) with TMA-compatible
  layouts a persistent kernel (grouped tile order, TMA loads pipelined into wgmma, TMA stores);
  elsewhere (unaligned strides, pre-Hopper GPUs, MATMUL_TRITON_TMA=0) a pointer kernel. Each launch
  runs its GPU model's pick (matmul_picks.yaml), or else is autotuned over a short pruned list;
  under ``TRITON_INTERPRET=1`` the same kernels run with one small config. Results and tuning history: docs/kernels/matmul.md.
- ``cuda``: kernels/cuda/matmul.cu, a shared-memory tiled SIMT SGEMM, fp32 only.
- ``torch_manual``: broadcast-multiply-sum in fp32; it materializes an M x K x N tensor, so it is
  for small sizes only (see ``manual_bytes``).

``tf32=True`` (fp32 inputs only) lets torch, compiled and triton multiply in TF32 on the tensor
cores (``allow_tf32`` set for the call only, or ``input_precision="tf32"``); ``tf32=False``
computes fp32 in full precision whatever the global flag says.
"""
from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from pathlib import Path

import torch
import triton
import triton.language as tl
import yaml
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels import common
# triton_compat also fits the interpreter to NumPy >= 2.4 (on import) and widens dot operands there.
from kernels.triton_compat import INTERPRET as _INTERPRET
from kernels.triton_compat import dot

# Precision names used in test ids; "tf32" is fp32 storage with TF32 multiplies allowed.
DTYPES: dict[str, torch.dtype] = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
    "tf32": torch.float32,
}

# Impls that have a TF32 mode (the rest compute fp32 in full precision only).
TF32_IMPLS = frozenset({"torch", "compiled", "triton"})

# torch_manual materializes an M x K x N fp32 product tensor; above this it is not run.
MANUAL_MAX_BYTES = 1 << 30


def storage_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """The torch dtype of the tensors for a precision name ("tf32" -> torch.float32)."""
    return DTYPES[dtype] if isinstance(dtype, str) else dtype


def is_tf32(dtype: torch.dtype | str) -> bool:
    return dtype == "tf32"


# ----------------------------------------------------------------------------------------------
# reference, inputs, cost model, tolerance
# ----------------------------------------------------------------------------------------------

def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A @ B in float64 on the inputs' device (the inputs are exactly representable in float64)."""
    return torch.matmul(a.double(), b.double())


def make_inputs(shape: tuple[int, int, int], dtype: torch.dtype | str, device, seed: int = 0):
    """(A, B) for shape (M, N, K): standard-normal entries drawn on `device` in fp32 from a
    seeded generator, then rounded to the storage dtype.

    tolerance() assumes this unit variance: an element of C then has an rms of sqrt(K).
    """
    m, n, k = shape
    gen = torch.Generator(device=device).manual_seed(seed)
    dt = storage_dtype(dtype)
    a = torch.randn(m, k, generator=gen, dtype=torch.float32, device=device).to(dt)
    b = torch.randn(k, n, generator=gen, dtype=torch.float32, device=device).to(dt)
    return a, b


def cost(shape: tuple[int, int, int], dtype: torch.dtype | str) -> tuple[int, int]:
    """(bytes, flops) of one C = A @ B.

    bytes: the minimum traffic, A and B read once and C written once: (M*K + K*N + M*N) * itemsize
    (tf32 counts fp32's 4 bytes). flops: 2*M*N*K (one multiply and one add per term).
    """
    m, n, k = shape
    itemsize = storage_dtype(dtype).itemsize
    return (m * k + k * n + m * n) * itemsize, 2 * m * n * k


def manual_bytes(shape: tuple[int, int, int]) -> int:
    """Bytes of the M x K x N fp32 temporary that torch_manual materializes."""
    m, n, k = shape
    return m * n * k * 4


# Unit roundoff u = 2**-(mantissa bits + 1) (round to nearest); TF32's 10-bit operands are
# counted at 2**-10 (one ulp), since the tensor cores may truncate instead of round them.
_U_OUT = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}
_U_FP32 = 2.0**-24


def tolerance(dtype: torch.dtype | str, k: int) -> tuple[float, float]:
    """(rtol, atol) for comparing C with the float64 reference(), for inputs from make_inputs().

    The one place the matmul tolerances are defined (a value passes when |out - ref| <= atol +
    rtol * |ref|). For unit-normal inputs an element of C has an rms of sqrt(K); its error comes
    from operand rounding in the multiply (u_mul: 2**-10 for TF32, 2**-24 for fp32), fp32
    accumulation and rounding to the output dtype (u_out), so rtol = 2 * max(u_out, u_mul) and
    atol = sqrt(K) * (5 u_mul + 10 sqrt(K) 2**-24 + 2 u_out): several sigma past a correct kernel,
    well short of a skipped K slice or a wrong row. Derivation and examples: docs/kernels/matmul.md.
    """
    dt = storage_dtype(dtype)
    u_out = _U_OUT[dt]
    u_mul = 2.0**-10 if is_tf32(dtype) else (_U_FP32 if dt == torch.float32 else 0.0)
    scale = math.sqrt(max(k, 1))  # rms of an element of C for unit-normal inputs
    rtol = 2.0 * max(u_out, u_mul)
    atol = scale * (5.0 * u_mul + 10.0 * scale * _U_FP32 + 2.0 * u_out)
    return rtol, atol


# ----------------------------------------------------------------------------------------------
# torch impls
# ----------------------------------------------------------------------------------------------

class tf32_allowed:
    """Set torch.backends.cuda.matmul.allow_tf32 for the duration of one call, then restore it."""

    def __init__(self, allow: bool):
        self.allow = allow

    def __enter__(self):
        self.prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = self.allow

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32 = self.prev
        return False


def torch_matmul(a: torch.Tensor, b: torch.Tensor, *, tf32: bool = False) -> torch.Tensor:
    with tf32_allowed(tf32):
        return torch.matmul(a, b)


def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a, b)


@functools.cache
def _compiled_mm() -> Callable:
    # dynamic=True: one graph per dtype instead of one per shape (the suite has ~10 shapes).
    return torch.compile(_mm, dynamic=True)


def compiled_matmul(a: torch.Tensor, b: torch.Tensor, *, tf32: bool = False) -> torch.Tensor:
    # The lowered graph calls aten mm (cuBLAS), which reads allow_tf32 at run time.
    with tf32_allowed(tf32):
        return _compiled_mm()(a, b)


def torch_manual(a: torch.Tensor, b: torch.Tensor, *, tf32: bool = False) -> torch.Tensor:
    """Broadcast-multiply-sum in fp32: materializes the M x K x N products (manual_bytes())."""
    if tf32:
        raise ValueError("torch_manual has no TF32 mode")
    products = a.float()[:, :, None] * b.float()[None, :, :]
    return products.sum(dim=1).to(a.dtype)


# ----------------------------------------------------------------------------------------------
# Triton
# ----------------------------------------------------------------------------------------------

@triton.jit
def _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped tile order: GROUP_M tile-rows are walked column by column, so consecutive tiles
    share B columns and a group's A rows stay in L2."""
    span = GROUP_M * num_pid_n
    first_m = (tile // span) * GROUP_M
    rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % span) % rows
    pid_n = (tile % span) // rows
    return pid_m, pid_n


@triton.jit
def _round_to_tf32(x):
    """fp32 -> TF32 with round-to-nearest (the tensor cores themselves would truncate)."""
    return tl.inline_asm_elementwise("cvt.rna.tf32.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                     is_pure=True, pack=1)


@triton.jit
def _load_b(b_desc, ki, off_n, BLOCK_K: tl.constexpr, B_T: tl.constexpr):
    """The (BLOCK_K, BLOCK_N) tile of B at K-step ki; with B_T the descriptor holds B^T (N x K)."""
    if B_T:
        tile = b_desc.load([off_n, ki * BLOCK_K]).T
    else:
        tile = b_desc.load([ki * BLOCK_K, off_n])
    return tile


@triton.jit
def _matmul_tma_kernel(a_desc, b_desc, c_desc, c_ptr, stride_cm, M, N, K, num_programs,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr,
                       WARP_SPECIALIZE: tl.constexpr, B_T: tl.constexpr, SWAP_AB: tl.constexpr,
                       PRECISION: tl.constexpr, DTYPE: tl.constexpr, EMULATED: tl.constexpr = False):
    """TMA GEMM (sm_90+). DTYPE only keys the autotuner (the descriptors carry the types).

    WARP_SPECIALIZE=False: persistent; program p computes tiles p, p + num_programs, ... and
    stores C through TMA (in EPILOGUE_SPLIT column pieces).
    WARP_SPECIALIZE=True (experimental, not autotuned: see EXPERIMENTAL_WS_CONFIGS): one tile
    per program, the K loop split by Triton into a TMA producer and two wgmma consumer warpgroups.
    C goes out through masked pointer stores, because the pass cannot split a descriptor store.
    B_T: b_desc describes B^T (N x K, row-major), so B's tiles sit K-major in shared memory: B's
    own layout when B is a transposed view, and the only layout wgmma reads TF32 from shared memory.
    SWAP_AB (TF32 with a row-major B and M < TF32_TRANSPOSE_MIN_M; persistent form only): computes
    C^T = B^T A^T with B^T as the register operand (rounded to TF32 on the way, except under the
    interpreter), transposing the accumulator once per tile. Why and what it gains:
    docs/kernels/matmul.md.
    EMULATED: running under TRITON_INTERPRET=1 (see _interpret_matmul).
    """
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    if WARP_SPECIALIZE:
        tl.static_assert(not SWAP_AB, "the swapped TF32 form has no warp-specialized variant")
        pid_m, pid_n = _tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in tl.range(k_tiles, warp_specialize=True):
            a = a_desc.load([off_m, ki * BLOCK_K])
            b = _load_b(b_desc, ki, off_n, BLOCK_K, B_T)
            acc = dot(a, b, acc, input_precision=PRECISION, WIDEN=EMULATED)
        rm = off_m + tl.arange(0, BLOCK_M)
        rn = off_n + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + rm.to(tl.int64)[:, None] * stride_cm + rn[None, :]
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))
    else:
        out_ty = c_desc.dtype
        num_tiles = num_pid_m * num_pid_n
        for tile in tl.range(tl.program_id(0), num_tiles, num_programs, flatten=True):
            pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
            off_m = pid_m * BLOCK_M
            off_n = pid_n * BLOCK_N
            if SWAP_AB:
                acc_t = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
                for ki in range(k_tiles):
                    a = a_desc.load([off_m, ki * BLOCK_K])
                    bt = b_desc.load([ki * BLOCK_K, off_n]).T
                    if not EMULATED:
                        bt = _round_to_tf32(bt)
                    acc_t = tl.dot(bt, a.T, acc_t, input_precision=PRECISION)
                acc = acc_t.T
            else:
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for ki in range(k_tiles):
                    a = a_desc.load([off_m, ki * BLOCK_K])
                    b = _load_b(b_desc, ki, off_n, BLOCK_K, B_T)
                    acc = dot(a, b, acc, input_precision=PRECISION, WIDEN=EMULATED)
            if EPILOGUE_SPLIT == 2:
                # C in two BLOCK_M x BLOCK_N/2 halves: half the epilogue's shared-memory buffer,
                # which leaves room for a deeper load pipeline.
                halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
                left, right = tl.split(halves)
                c_desc.store([off_m, off_n], left.to(out_ty))
                c_desc.store([off_m, off_n + BLOCK_N // 2], right.to(out_ty))
            else:
                c_desc.store([off_m, off_n], acc.to(out_ty))


@triton.jit
def _matmul_ptr_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr, PRECISION: tl.constexpr, DTYPE: tl.constexpr,
                       EMULATED: tl.constexpr = False):
    """One program per C tile, pointer loads; any strides, any M, N, K."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    # Rows/columns past the edge read row/column 0 instead (in bounds, never stored), so only
    # the K tail needs a mask inside the loop. The hints restore the contiguity that tl.where
    # hides, so aligned tiles still load 16 bytes at a time (a clamped group reads columns
    # 0..7 of its row: in bounds, and never stored).
    ram = tl.max_contiguous(tl.multiple_of(tl.where(rm < M, rm, 0), BLOCK_M), BLOCK_M)
    rbn = tl.max_contiguous(tl.multiple_of(tl.where(rn < N, rn, 0), BLOCK_N), BLOCK_N)
    a_ptrs = a_ptr + ram[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rbn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        k_left = K - ki * BLOCK_K
        a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        acc = dot(a, b, acc, input_precision=PRECISION, WIDEN=EMULATED)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm.to(tl.int64)[:, None] * stride_cm + rn.to(tl.int64)[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _transpose_kernel(src, dst, R, C, stride_r, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """dst (C x R, row-major) = src^T for an R x C src with unit column stride, a tile per program:
    rows of the tile are read and its columns written 128 bytes at a time (Triton stages the
    transposition through shared memory)."""
    rr = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    tile = tl.load(src + rr.to(tl.int64)[:, None] * stride_r + cc[None, :],
                   mask=(rr[:, None] < R) & (cc[None, :] < C))
    tl.store(dst + cc.to(tl.int64)[:, None] * R + rr[None, :], tl.trans(tile),
             mask=(cc[:, None] < C) & (rr[None, :] < R))


# ---- configs ----------------------------------------------------------------------------------
# TMA kernel: (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps, EPILOGUE_SPLIT, WARP_SPECIALIZE),
# per (operand dtype, precision); every entry fits sm_90a's registers and shared memory
# (docs/kernels/matmul.md, "Config tables"). 128x256 stages of 48 KiB for large shapes, 128x128
# for few tiles, 64-row tiles only where M <= 64; fp32 "ieee" has no tensor-core path.
_TMA_TABLE: dict[tuple[str, str], list[tuple]] = {
    ("16", "ieee"): [
        (128, 256, 64, 3, 8, 2, False),
        (128, 256, 64, 4, 8, 2, False),
        (128, 128, 64, 4, 8, 1, False),
        (64, 256, 64, 4, 4, 2, False),
        (64, 128, 128, 4, 4, 1, False),
    ],
    ("fp32", "tf32"): [  # B_T: see _matmul_tma_kernel
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
_PTR_TABLE: dict[tuple[str, str], list[tuple]] = {
    ("16", "ieee"): [(128, 128, 32, 3, 8), (128, 128, 32, 4, 8), (64, 128, 32, 3, 4)],
    ("fp32", "tf32"): [(128, 128, 32, 3, 8), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4)],
    ("fp32", "ieee"): [(128, 128, 32, 3, 8), (128, 64, 32, 3, 8), (64, 64, 32, 3, 4)],
}
_TMA_FIELDS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "EPILOGUE_SPLIT",
               "WARP_SPECIALIZE")
_PTR_FIELDS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps")


def _table_key(dtype_key: str, precision: str, swap_ab: bool = False) -> tuple[str, str]:
    if dtype_key != "fp32":
        return ("16", "ieee")
    return ("fp32", "tf32-swap") if swap_ab else ("fp32", precision)


def _set_tma_blocks(nargs):
    """Pre-hook: give the host-side descriptors the block shapes of the config being run."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if nargs["B_T"] else [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn // nargs["EPILOGUE_SPLIT"]]


def _make_config(fields, values, pre_hook=None) -> triton.Config:
    kw = dict(zip(fields, values))
    stages, warps = kw.pop("num_stages"), kw.pop("num_warps")
    kw["GROUP_M"] = 8
    return triton.Config(kw, num_stages=stages, num_warps=warps, pre_hook=pre_hook)


def _config_id(cfg: triton.Config, fields) -> tuple:
    kw = dict(cfg.kwargs, num_stages=cfg.num_stages, num_warps=cfg.num_warps)
    return tuple(kw[f] for f in fields)


def _candidates(fields, values: list[tuple], m: int, split_by_m: bool) -> list[tuple]:
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
def _picks(device_index: int) -> dict[str, tuple]:
    """This GPU model's picks (an empty table on a model without any)."""
    from pytest_gpuperf.measure.device import describe

    if not PICKS_PATH.exists():
        return {}
    table = yaml.safe_load(PICKS_PATH.read_text()) or {}
    return {key: tuple(v) for key, v in (table.get(describe(device_index)["key"]) or {}).items()}


def _pruner(table, fields, kernel: str, split_by_m: bool = True):
    def prune(configs, nargs, **kwargs):
        """This dtype/precision's configs that may compete for this launch, or only its pick."""
        ids = [_config_id(c, fields) for c in configs]
        wanted = set(table[_table_key(kwargs["DTYPE"], kwargs["PRECISION"], kwargs.get("SWAP_AB", False))])
        values = _candidates(fields, [v for v in ids if v in wanted], nargs["M"], split_by_m)
        key = pick_key(kernel, nargs["M"], nargs["N"], nargs["K"], kwargs["DTYPE"], kwargs["PRECISION"],
                       kwargs.get("B_T", False), kwargs.get("SWAP_AB", False))
        picked = _picks(nargs["c_ptr"].device.index or 0).get(key)
        if picked in values:
            values = [picked]
        return [c for c, v in zip(configs, ids) if v in values]
    return prune


def candidates(a: torch.Tensor, b: torch.Tensor, *, tf32: bool = False) -> tuple[str, list[dict]]:
    """The pick key of triton_matmul(a, b, tf32=tf32) and the configs that compete for it, each as
    the dict that `config=` takes (kernels/tune_matmul.py times them)."""
    (m, k), n = a.shape, b.shape[1]
    precision, dkey = ("tf32" if tf32 else "ieee"), _DTYPE_KEY[a.dtype]
    if uses_tma(a, b, tf32=tf32):
        b_t = _k_major(b) or _copies_b_t(b, m, tf32)  # as b_operand decides
        swap_ab = tf32 and not b_t
        table, fields, kernel, split = _TMA_TABLE, _TMA_FIELDS, "tma", True
    else:
        b_t = swap_ab = False
        table, fields, kernel, split = _PTR_TABLE, _PTR_FIELDS, "ptr", False
    values = _candidates(fields, table[_table_key(dkey, precision, swap_ab)], m, split)
    configs = [dict(zip(fields, v), GROUP_M=8) for v in values]
    return pick_key(kernel, m, n, k, dkey, precision, b_t, swap_ab), configs


def _autotune_bench(kernel_call, quantiles):
    """Each config timed as a CUDA graph of back-to-back calls (medians), so that launch jitter of a
    few-µs GEMM does not decide the pick (docs/kernels/matmul.md, "Autotuning")."""
    return triton.testing.do_bench_cudagraph(kernel_call, rep=5, quantiles=quantiles)


def _unique(table) -> list[tuple]:
    return list(dict.fromkeys(v for entries in table.values() for v in entries))


_TUNE_KEY = ["M", "N", "K", "DTYPE", "PRECISION"]
_tma_tuned = triton.autotune(
    configs=[_make_config(_TMA_FIELDS, v, _set_tma_blocks) for v in _unique(_TMA_TABLE)],
    key=[*_TUNE_KEY, "B_T", "SWAP_AB"], prune_configs_by={"early_config_prune": _pruner(_TMA_TABLE, _TMA_FIELDS, "tma")},
    do_bench=_autotune_bench)(_matmul_tma_kernel)
_ptr_tuned = triton.autotune(  # B's strides are runtime arguments here: one key for all layouts
    configs=[_make_config(_PTR_FIELDS, v) for v in _unique(_PTR_TABLE)],
    key=_TUNE_KEY, prune_configs_by={"early_config_prune": _pruner(_PTR_TABLE, _PTR_FIELDS, "ptr", split_by_m=False)},
    do_bench=_autotune_bench)(_matmul_ptr_kernel)

_DTYPE_KEY = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}


# MATMUL_TRITON_TMA=0 sends every call to the pointer kernel (a switch for triage on a device
# where the TMA kernel misbehaves; the default is on).
_TMA_ENABLED = os.environ.get("MATMUL_TRITON_TMA", "1") != "0"


def _tma_capable(device: torch.device) -> bool:
    """TMA descriptors: Hopper or newer, or the interpreter (which emulates host descriptors)."""
    if not _TMA_ENABLED:
        return False
    if _INTERPRET:
        return True
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 9


def _tma_layout_ok(*tensors: torch.Tensor) -> bool:
    """TMA needs unit inner strides, 16-byte aligned outer strides and 16-byte aligned bases."""
    for t in tensors:
        if t.stride(1) != 1 or t.stride(0) <= 0 or (t.stride(0) * t.element_size()) % 16 or t.data_ptr() % 16:
            return False
    return True


def _k_major(b: torch.Tensor) -> bool:
    """B stored K-major (a transposed view of a row-major N x K tensor, like an nn.Linear weight)."""
    return b.stride(0) == 1 and b.stride(1) > 1


# From this M, TF32 with a row-major B copies B^T first (the copy costs ~400/M of the multiply);
# below it the TMA kernel computes C^T = B^T A^T (SWAP_AB). Guarded by perf_tests/test_matmul.py.
TF32_TRANSPOSE_MIN_M = 2048


def _copies_b_t(b: torch.Tensor, m: int, tf32: bool) -> bool:
    """Whether the TMA path copies a row-major B into B^T (TF32 and an M that amortizes the copy)."""
    return tf32 and not _k_major(b) and m >= TF32_TRANSPOSE_MIN_M


def b_operand(b: torch.Tensor, tf32: bool, m: int) -> tuple[torch.Tensor, bool]:
    """What the TMA kernel's B descriptor describes for an M-row A: (B, False), or (B^T as an
    N x K row-major tensor, True). A K-major B is used as it is; TF32 with M >= TF32_TRANSPOSE_MIN_M
    copies a row-major B into B^T first (one transposition kernel, inside the timed call): wgmma
    reads TF32 from shared memory only K-major (see _matmul_tma_kernel)."""
    if _k_major(b):
        return b.t(), True
    if _copies_b_t(b, m, tf32):
        return transposed(b), True
    return b, False


# B^T copy tiles (rows, columns, warps) of _transpose_kernel.
TRANSPOSE_BLOCK = (64, 64, 4)


def transposed(b: torch.Tensor, block: tuple[int, int, int] = TRANSPOSE_BLOCK) -> torch.Tensor:
    """B^T as a contiguous N x K tensor: the Triton tile copy on a GPU (and under the interpreter)
    for a B with unit column stride, torch's copy otherwise. The tile copy runs at copy speed,
    which torch's ``b.t().contiguous()`` does not (docs/kernels/matmul.md)."""
    if not (b.is_cuda or _INTERPRET) or b.stride(1) != 1:
        return b.t().contiguous()
    k, n = b.shape
    out = torch.empty((n, k), dtype=b.dtype, device=b.device)
    rows, cols, warps = block
    grid = (triton.cdiv(k, rows), triton.cdiv(n, cols))
    _transpose_kernel[grid](b, out, k, n, b.stride(0), BLOCK_R=rows, BLOCK_C=cols, num_warps=warps)
    return out


def uses_tma(a: torch.Tensor, b: torch.Tensor, *, tf32: bool) -> bool:
    """Whether triton_matmul(a, b, tf32=tf32) takes the TMA kernel (C is allocated contiguous)."""
    if not _tma_capable(a.device) or (b.shape[1] * a.element_size()) % 16:
        return False
    if _k_major(b):
        return _tma_layout_ok(a, b.t())
    if _copies_b_t(b, a.shape[0], tf32):  # B^T is a fresh contiguous copy: its rows (K elements) 16-byte aligned
        return _tma_layout_ok(a) and (b.shape[0] * b.element_size()) % 16 == 0
    return _tma_layout_ok(a, b)


def _check_operands(a: torch.Tensor, b: torch.Tensor, tf32: bool) -> None:
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs (M, K) @ (K, N), got {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype not in _DTYPE_KEY:
        raise TypeError(f"triton_matmul supports bf16/fp16/fp32 pairs, got {a.dtype} and {b.dtype}")
    if tf32 and a.dtype != torch.float32:
        raise ValueError("tf32=True applies to float32 inputs only")


def _launch(a, b, c, precision, config=None):
    """Launch the TMA or pointer kernel; config (a dict of the table fields plus GROUP_M) forces
    one config instead of autotuning, and EMULATED=True marks an interpreter run."""
    (m, k), n = a.shape, b.shape[1]
    dkey = _DTYPE_KEY[a.dtype]
    if uses_tma(a, b, tf32=precision == "tf32"):
        b_tensor, b_t = b_operand(b, precision == "tf32", m)
        swap_ab = precision == "tf32" and not b_t  # see TF32_TRANSPOSE_MIN_M
        # Placeholder block shapes: _set_tma_blocks gives each config its own.
        a_desc = TensorDescriptor.from_tensor(a, [16, 16])
        b_desc = TensorDescriptor.from_tensor(b_tensor, [16, 16])
        c_desc = TensorDescriptor.from_tensor(c, [16, 16])
        if _INTERPRET:
            sms = 3  # a few programs, so each walks several tiles of the persistent loop
        else:
            sms = common.sm_count(a.device)

        def grid(meta):
            tiles = triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])
            return (tiles if meta["WARP_SPECIALIZE"] else min(sms, tiles),)

        args = (a_desc, b_desc, c_desc, c, c.stride(0), m, n, k, sms)
        if config is None:
            _tma_tuned[grid](*args, PRECISION=precision, DTYPE=dkey, B_T=b_t, SWAP_AB=swap_ab)
        else:
            if swap_ab and config.get("WARP_SPECIALIZE"):
                raise ValueError("a warp-specialized config cannot run TF32 with a row-major B at M < "
                                 f"TF32_TRANSPOSE_MIN_M ({TF32_TRANSPOSE_MIN_M}; the swapped form has no such "
                                 "variant): pass B K-major (b.t().contiguous().t())")
            kw = dict({f: v for f, v in config.items() if f not in ("num_stages", "num_warps")}, B_T=b_t,
                      SWAP_AB=swap_ab)
            _set_tma_blocks(dict(kw, a_desc=a_desc, b_desc=b_desc, c_desc=c_desc))
            _matmul_tma_kernel[grid(kw)](*args, PRECISION=precision, DTYPE=dkey,
                                         num_stages=config.get("num_stages", 3),
                                         num_warps=config.get("num_warps", 4), **kw)
        return "tma"

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    if config is None:
        _ptr_tuned[grid](*args, PRECISION=precision, DTYPE=dkey)
    else:
        kw = {f: v for f, v in config.items() if f in _PTR_FIELDS + ("GROUP_M", "EMULATED")
              and f not in ("num_stages", "num_warps")}
        _matmul_ptr_kernel[grid(kw)](*args, PRECISION=precision, DTYPE=dkey,
                                     num_stages=config.get("num_stages", 3),
                                     num_warps=config.get("num_warps", 4), **kw)
    return "ptr"


# Interpreter config: small tiles (it runs a program at a time in numpy).
INTERPRET_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 2, "EPILOGUE_SPLIT": 2,
                    "WARP_SPECIALIZE": False}


def _interpret_matmul(a: torch.Tensor, b: torch.Tensor, precision: str, config: dict | None) -> torch.Tensor:
    """TRITON_INTERPRET=1: the same kernels, one small config (INTERPRET_CONFIG unless given),
    no autotuning.

    The interpreter's own bf16/fp16 arithmetic is not faithful, so here (EMULATED) operands go to
    fp32 before tl.dot and C is rounded to the output dtype by torch; tiling, masking, TMA
    coordinates and the tile walk, what a CPU run can check, are the GPU kernels' own.
    """
    c = torch.empty((a.shape[0], b.shape[1]), dtype=torch.float32, device=a.device)
    cfg = dict(config or INTERPRET_CONFIG, EMULATED=True)
    _launch(a, b, c, precision, cfg)
    return c.to(a.dtype)


def triton_matmul(a: torch.Tensor, b: torch.Tensor, *, tf32: bool = False,
                  config: dict | None = None) -> torch.Tensor:
    """C = A @ B with the Triton kernels; config forces one config (benchmarks, tests)."""
    _check_operands(a, b, tf32)
    (m, k), n = a.shape, b.shape[1]
    precision = "tf32" if tf32 else "ieee"
    if m == 0 or n == 0 or k == 0:
        return torch.zeros((m, n), dtype=a.dtype, device=a.device)
    if _INTERPRET:
        return _interpret_matmul(a, b, precision, config)
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    _launch(a, b, c, precision, config)
    return c


# ----------------------------------------------------------------------------------------------
# CUDA C++ (SIMT fp32)
# ----------------------------------------------------------------------------------------------

def cuda_matmul(a: torch.Tensor, b: torch.Tensor, *, tf32: bool = False) -> torch.Tensor:
    if tf32:
        raise ValueError("the SIMT CUDA kernel has no TF32 mode (fp32 FFMA only)")
    if a.dtype != torch.float32 or b.dtype != torch.float32:
        raise TypeError(f"the SIMT CUDA kernel is fp32 only, got {a.dtype} and {b.dtype}")
    from kernels import cuda_ext

    return cuda_ext.load("matmul").matmul(a, b)


IMPLS: dict[str, Callable[..., torch.Tensor]] = {
    "torch_manual": torch_manual,
    "torch": torch_matmul,
    "compiled": compiled_matmul,
    "triton": triton_matmul,
    "cuda": cuda_matmul,
}
