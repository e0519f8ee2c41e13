"""Row-wise softmax over the last dimension, in five implementations.

All implementations take a tensor of any shape (float32, bfloat16 or float16) and return a new
contiguous tensor of the same shape and dtype; bf16/fp16 are computed in fp32.

NaN/inf follow the float64 reference (x - max(x), exp, divide by the sum): a NaN or +inf in a row
makes that row NaN, a -inf element gives 0, and a row of all -inf is NaN.

Triton: rows that fit one block (<= 16384 elements; float32 rows below TILED_FP32_FROM) go to
`_softmax_rows_kernel` (a persistent grid over blocks of rows, each row loaded once and kept in
registers); longer rows go to `_softmax_long_kernel`, an online softmax over tiles. When there
are few long rows, each row is split across several programs (`splits`), every program owning
one slice; they exchange their (max, sum) partials through a small workspace and wait for each
other on an atomic counter. That wait needs every program of the grid resident at once, so the
split grid is kept to at most one program per multiprocessor; under the interpreter (programs run
one after another) splits is 1.
"""
from __future__ import annotations

import os
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from kernels import common, cuda_ext


def reference(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension in float64, from the definition."""
    x = x.double()
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def make_inputs(shape, dtype: torch.dtype, device, seed: int = 0) -> tuple[torch.Tensor]:
    return (common.randn_input(shape, dtype, device, seed),)


def cost(shape, dtype: torch.dtype) -> tuple[int, int]:
    """(bytes, flops): the input read once and the output written once (what a fused kernel must
    move; kernels that re-read a row from L2 move no more DRAM bytes than that). 5 flops per
    element: max, subtract, exp (counted as one), sum, divide."""
    return common.streaming_cost(shape, dtype, 5)


# --- torch_manual: elementary ops, as written without knowing torch.softmax ------------------
def torch_manual(x: torch.Tensor) -> torch.Tensor:
    xf = x.float()  # fp32 math for bf16/fp16, one rounding at the end
    m = xf.max(dim=-1, keepdim=True).values
    e = torch.exp(xf - m)
    y = e / e.sum(dim=-1, keepdim=True)
    return y.to(x.dtype)


def torch_builtin(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


_compiled_fn = common.lazy_compile(torch_manual)  # torch.compile(torch_manual), built on first use


def compiled(x: torch.Tensor) -> torch.Tensor:
    return _compiled_fn()(x)


# --- triton ------------------------------------------------------------------------------------
MAX_ROW_BLOCK = 16384  # longest row kept whole in one program's registers


@triton.jit
def _softmax_rows_kernel(x_ptr, y_ptr, rows, cols, num_programs, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, ITERS: tl.constexpr, EVICT: tl.constexpr):
    """Rows that fit in BLOCK_N: BLOCK_M rows per step, each program striding over row blocks
    (ITERS steps, 1 unless the grid is persistent; the row mask covers a step past the end).
    EVICT: the loads' eviction policy ("" for none)."""
    pid = tl.program_id(0)
    offs_n = tl.arange(0, BLOCK_N)
    col_mask = offs_n < cols
    for i in tl.range(0, ITERS):
        offs_m = (pid + i * num_programs) * BLOCK_M + tl.arange(0, BLOCK_M)
        offsets = offs_m.to(tl.int64)[:, None] * cols + offs_n[None, :]
        mask = (offs_m[:, None] < rows) & col_mask[None, :]
        x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"), eviction_policy=EVICT)
        x = x.to(tl.float32)
        # A row of all -inf gives NaN here (-inf - -inf), as in the reference.
        e = tl.exp(x - tl.max(x, axis=1)[:, None])
        y = e / tl.sum(e, axis=1)[:, None]
        tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _exp_shift(x, m):
    """exp(x - m), 0 where x is -inf (so an all -inf tile does not turn into NaN)."""
    return tl.where(x == -float("inf"), 0.0, tl.exp(x - m))


@triton.jit
def _rescale(m, m_new):
    """exp(m - m_new), 1 where they are equal (also -inf == -inf)."""
    return tl.where(m == m_new, 1.0, tl.exp(m - m_new))


@triton.jit
def _softmax_long_kernel(x_ptr, y_ptr, part_ptr, count_ptr, cols, slice_len, SPLITS: tl.constexpr,
                         SPLITS_POW2: tl.constexpr, TILES: tl.constexpr, BLOCK: tl.constexpr,
                         KEEP: tl.constexpr, DROP: tl.constexpr, EVEN: tl.constexpr):
    """Rows longer than a block. Program (row, s) owns columns [s*slice_len, (s+1)*slice_len),
    TILES tiles of BLOCK. TILES == 1 keeps the tile in registers (one read); otherwise an online
    pass over the tiles, then a second pass that re-reads them (from L2) to write. KEEP / DROP:
    the eviction policies of the first pass's loads (which the second pass wants in L2) and of the
    second's ("" for none). EVEN: the tiles cover every slice exactly (no masks)."""
    pid = tl.program_id(0)
    row = pid // SPLITS
    split = pid % SPLITS
    x_row = x_ptr + row.to(tl.int64) * cols
    y_row = y_ptr + row.to(tl.int64) * cols
    start = split * slice_len
    offs = tl.arange(0, BLOCK)

    if TILES == 1:
        cmask = (start + offs < cols) & (offs < slice_len)
        x = tl.load(x_row + start + offs, mask=cmask, other=-float("inf")).to(tl.float32)
        m = tl.max(x, axis=0)
        e = _exp_shift(x, m)
        s = tl.sum(e, axis=0)
    else:
        # Online softmax per lane: m_vec/s_vec hold a running (max, sum) for every lane of the tile.
        # The running max starts at -FLT_MAX, not -inf, so the exps need no -inf guards; a row of
        # only -inf keeps the sentinel and a zero sum (NaN), a row with +inf gives NaN, as in the reference.
        m_vec = tl.full([BLOCK], -3.4028234663852886e38, tl.float32)
        s_vec = tl.zeros([BLOCK], tl.float32)
        for t in range(TILES):
            c = t * BLOCK + offs
            if EVEN:
                x = tl.load(x_row + start + c, eviction_policy=KEEP).to(tl.float32)
            else:
                cmask = (start + c < cols) & (c < slice_len)
                x = tl.load(x_row + start + c, mask=cmask, other=-float("inf"), eviction_policy=KEEP).to(tl.float32)
            m_new = tl.maximum(m_vec, x)
            s_vec = s_vec * tl.exp(m_vec - m_new) + tl.exp(x - m_new)
            m_vec = m_new
        m = tl.max(m_vec, axis=0)
        s = tl.sum(s_vec * tl.exp(m_vec - m), axis=0)

    if SPLITS > 1:
        # Publish this slice's (max, sum), wait until the row's SPLITS programs all have, combine.
        slot = part_ptr + 2 * (row * SPLITS + split)
        tl.store(slot, m)
        tl.store(slot + 1, s)
        tl.debug_barrier()  # the stores above happen before the release below
        arrived = count_ptr + 2 * row
        departed = arrived + 1
        tl.atomic_add(arrived, 1, sem="release")
        while tl.atomic_add(arrived, 0, sem="acquire") < SPLITS:
            pass
        sp = tl.arange(0, SPLITS_POW2)
        pmask = sp < SPLITS
        parts = part_ptr + 2 * (row * SPLITS + sp)
        pm = tl.load(parts, mask=pmask, other=-float("inf"), volatile=True)
        ps = tl.load(parts + 1, mask=pmask, other=0.0, volatile=True)
        m_row = tl.max(pm, axis=0)
        s_row = tl.sum(ps * _rescale(pm, m_row), axis=0)
        # The last program to leave resets the counters for the next launch.
        if tl.atomic_add(departed, 1, sem="acq_rel") == SPLITS - 1:
            tl.atomic_xchg(arrived, 0)
            tl.atomic_xchg(departed, 0)
    else:
        m_row = m
        s_row = s

    if TILES == 1:
        y = e * (_rescale(m, m_row) / s_row)
        tl.store(y_row + start + offs, y.to(y_ptr.dtype.element_ty), mask=cmask)
    else:
        inv = 1.0 / s_row
        for t in range(TILES):
            c = t * BLOCK + offs
            if EVEN:
                x = tl.load(x_row + start + c, eviction_policy=DROP).to(tl.float32)
                y = tl.exp(x - m_row) * inv  # m_row is finite here (or +inf: a NaN row)
                tl.store(y_row + start + c, y.to(y_ptr.dtype.element_ty))
            else:
                cmask = (start + c < cols) & (c < slice_len)
                x = tl.load(x_row + start + c, mask=cmask, other=-float("inf"), eviction_policy=DROP).to(tl.float32)
                y = tl.exp(x - m_row) * inv
                tl.store(y_row + start + c, y.to(y_ptr.dtype.element_ty), mask=cmask)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


_workspaces: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def _workspace(device: torch.device, programs: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Partials (2 floats per program) and counters (2 ints per row), zeroed once and kept: the
    kernel leaves the counters at zero when it finishes, so no launch is spent clearing them."""
    ws = _workspaces.get(device)
    if ws is None or ws[0].numel() < 2 * programs or ws[1].numel() < 2 * rows:
        size = max(2 * programs, 2 * rows, 1024)
        ws = (torch.zeros(size, device=device, dtype=torch.float32),
              torch.zeros(size, device=device, dtype=torch.int32))
        _workspaces[device] = ws
    return ws


def rows_config(rows: int, cols: int, sms: int, programs_per_sm: int = 0) -> dict:
    """Launch parameters of the row kernel: at least 4K elements per program step; the grid is
    one program per block of rows, or programs_per_sm * SMs programs striding over them."""
    block_n = triton.next_power_of_2(cols)
    block_m = max(1, min(triton.next_power_of_2(rows), 4096 // block_n))
    num_warps = 16 if block_n >= 8192 else 8 if block_n >= 2048 else 4
    row_blocks = triton.cdiv(rows, block_m)
    programs = min(row_blocks, sms * programs_per_sm) if programs_per_sm else row_blocks
    return dict(BLOCK_M=block_m, BLOCK_N=block_n, programs=programs, num_warps=num_warps, num_stages=1, evict="")


#: float32 rows from this length on take the tiled kernel rather than the register-resident row
#: kernel, which measured slower there; 16-bit rows stay in the row kernel (docs/kernels/softmax.md).
TILED_FP32_FROM = 8192


def long_config(rows: int, cols: int, sms: int, interpreting: bool, elem_size: int = 4) -> dict:
    """Launch parameters of the long-row kernel: split rows over programs when rows are few; a
    split slice of up to 8192 elements is one tile in registers, anything else goes in tiles of
    4096. Tiled programs run 16 bytes per thread per tile (32 warps in fp32, 16 in 16-bit) and
    keep their row in L2 between the passes (evict_last, then evict_first)."""
    splits = 1
    if not interpreting and rows * 2 <= sms:
        splits = max(1, min(sms // rows, triton.cdiv(cols, 2048)))
    slice_len = triton.cdiv(cols, splits)
    if splits > 1 and slice_len <= 8192:
        block, tiles = triton.next_power_of_2(slice_len), 1
    else:
        block = 4096
        tiles = triton.cdiv(slice_len, block)
    slice_len = block * tiles if splits > 1 else slice_len
    splits = triton.cdiv(cols, slice_len)  # no empty slices
    if tiles == 1:
        return dict(splits=splits, slice_len=slice_len, tiles=1, block=block, num_warps=8 if block >= 4096 else 4,
                    keep="", drop="")
    return dict(splits=splits, slice_len=slice_len, tiles=tiles, block=block,
                num_warps=min(32, block * elem_size // 512), keep="evict_last", drop="evict_first")


def triton_softmax(x: torch.Tensor, *, config: dict | None = None) -> torch.Tensor:
    """`config` (for tuning and tests) replaces the chosen launch parameters: a rows_config() or
    long_config() dict; with "kernel": "long" a long_config() applies to rows of any length."""
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    cols = x.shape[-1]
    rows = x.numel() // cols
    sms = common.sm_count(x.device)
    row_kernel = cols <= MAX_ROW_BLOCK and not (x.dtype == torch.float32 and cols >= TILED_FP32_FROM)
    kernel = (config or {}).get("kernel", "rows" if row_kernel else "long")
    if kernel == "rows":
        cfg = config or rows_config(rows, cols, sms)
        _softmax_rows_kernel[(cfg["programs"],)](
            x, y, rows, cols, cfg["programs"], BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"],
            ITERS=triton.cdiv(triton.cdiv(rows, cfg["BLOCK_M"]), cfg["programs"]), num_warps=cfg["num_warps"],
            EVICT=cfg["evict"], num_stages=cfg["num_stages"])
        return y
    cfg = config or long_config(rows, cols, sms, _interpreting(), x.element_size())
    part, count = _workspace(x.device, rows * cfg["splits"], rows)
    _softmax_long_kernel[(rows * cfg["splits"],)](
        x, y, part, count, cols, cfg["slice_len"], SPLITS=cfg["splits"],
        SPLITS_POW2=triton.next_power_of_2(cfg["splits"]), TILES=cfg["tiles"], BLOCK=cfg["block"],
        KEEP=cfg["keep"], DROP=cfg["drop"], num_warps=cfg["num_warps"],
        EVEN=cfg.get("even", cols % cfg["slice_len"] == 0 and cfg["slice_len"] == cfg["block"] * cfg["tiles"]))
    return y


# --- CUDA C++ ----------------------------------------------------------------------------------
def cuda_softmax(x: torch.Tensor, *, path: int = 0, cluster: int = 0) -> torch.Tensor:
    """path: 0 auto, 1 warp per row, 2 block per row, 3 cluster per row; cluster: blocks per row (0 auto)."""
    return cuda_ext.load("softmax").softmax(x, path, cluster)


IMPLS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "torch_manual": torch_manual,
    "torch": torch_builtin,
    "compiled": compiled,
    "triton": triton_softmax,
    "cuda": cuda_softmax,
}
