"""The Triton matmul (``triton_matmul``, the ``triton`` impl of kernels/matmul.py): its kernels, their
autotuned launches and the host side that picks a kernel and a B operand for each call.

On Hopper (sm_90+) with TMA-compatible layouts a persistent kernel (grouped tile order, TMA loads
pipelined into wgmma, TMA stores); elsewhere (unaligned strides, pre-Hopper GPUs,
MATMUL_TRITON_TMA=0) a pointer kernel. Each launch runs its GPU model's pick, or else is autotuned
over a short pruned list (kernels/matmul_configs.py); under ``TRITON_INTERPRET=1`` the same kernels
run with one small config. Results and tuning history: docs/kernels/matmul.md.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels import common
from kernels.matmul_configs import (PTR_FIELDS, PTR_TABLE, TMA_FIELDS, TMA_TABLE, autotune_bench, competing,
                                    make_config, pick_key, pruner, set_tma_blocks, table_key, unique)
# triton_compat also fits the interpreter to NumPy >= 2.4 (on import) and widens dot operands there.
from kernels.triton_compat import INTERPRET as _INTERPRET
from kernels.triton_compat import dot


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


_TUNE_KEY = ["M", "N", "K", "DTYPE", "PRECISION"]
_tma_tuned = triton.autotune(
    configs=[make_config(TMA_FIELDS, v, set_tma_blocks) for v in unique(TMA_TABLE)],
    key=[*_TUNE_KEY, "B_T", "SWAP_AB"], prune_configs_by={"early_config_prune": pruner(TMA_TABLE, TMA_FIELDS, "tma")},
    do_bench=autotune_bench)(_matmul_tma_kernel)
_ptr_tuned = triton.autotune(  # B's strides are runtime arguments here: one key for all layouts
    configs=[make_config(PTR_FIELDS, v) for v in unique(PTR_TABLE)],
    key=_TUNE_KEY, prune_configs_by={"early_config_prune": pruner(PTR_TABLE, PTR_FIELDS, "ptr", split_by_m=False)},
    do_bench=autotune_bench)(_matmul_ptr_kernel)

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
        # Placeholder block shapes: set_tma_blocks gives each config its own.
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
            set_tma_blocks(dict(kw, a_desc=a_desc, b_desc=b_desc, c_desc=c_desc))
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
        kw = {f: v for f, v in config.items() if f in PTR_FIELDS + ("GROUP_M", "EMULATED")
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


def candidates(a: torch.Tensor, b: torch.Tensor, *, tf32: bool = False) -> tuple[str, list[dict]]:
    """The pick key of triton_matmul(a, b, tf32=tf32) and the configs that compete for it, each as
    the dict that `config=` takes (kernels/tune_matmul.py times them)."""
    (m, k), n = a.shape, b.shape[1]
    precision, dkey = ("tf32" if tf32 else "ieee"), _DTYPE_KEY[a.dtype]
    if uses_tma(a, b, tf32=tf32):
        b_t = _k_major(b) or _copies_b_t(b, m, tf32)  # as b_operand decides
        swap_ab = tf32 and not b_t
        table, fields, kernel, split = TMA_TABLE, TMA_FIELDS, "tma", True
    else:
        b_t = swap_ab = False
        table, fields, kernel, split = PTR_TABLE, PTR_FIELDS, "ptr", False
    values = competing(fields, table[table_key(dkey, precision, swap_ab)], m, split)
    configs = [dict(zip(fields, v), GROUP_M=8) for v in values]
    return pick_key(kernel, m, n, k, dkey, precision, b_t, swap_ab), configs
