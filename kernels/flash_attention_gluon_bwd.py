"""A Hopper (sm_90a) FlashAttention backward in Gluon, FlashAttention-3 style.

One program owns ``CONSUMERS * block_n`` keys of one (batch, head) and runs three partitions
(``gl.warp_specialize``), as the forward (``flash_attention_gluon``) does:

- a loader warp: each consumer's K and V tiles once, then Q with its lse rows and dO with its delta
  rows (``block_m`` queries) by TMA through a ``stages``-deep shared-memory ring (a "ready" mbarrier
  each for Q and dO, so S can start before dO lands, and one "empty" mbarrier a slot, one arrival
  per consumer);
- two consumer warpgroups, each owning ``block_n`` (64) keys, computing in the transposed (key-major)
  form so that no product needs P or dS transposed out of registers:
  S^T = K Q^T and dP^T = V dO^T by async ``warpgroup_mma`` from shared memory,
  P^T = exp2(S^T * scale*log2(e) - lse), dS^T = P^T (dP^T - delta) in float32 registers,
  dV += P^T dO (issued before dP^T is waited for) and dK += dS^T Q with P^T and dS^T as register
  A operands (``dk_smem_a``: dS^T from shared memory), and dS^T written to shared memory for dQ.

dQ = dS K. With ``dq_shared`` (the default) each consumer computes half of dQ's columns over both
consumers' keys, reading both dS^T buffers once an mbarrier says both are stored (a second says
both were read, before the next block's overwrite): each program adds every dQ element once per
query block, half the global traffic of the other way, where each consumer adds a partial over its
own keys (in ``dq_split`` column pieces: one 64x128 accumulator beside dK and dV spills). dQ leaves
by a TMA reduce-add (``cp.reduce.async.bulk.tensor``, FA3's way) into a float32 (B*H*N, D)
accumulator, then one cast; ``dq_atomic`` tiles add by ``gl.atomic_add`` instead (slower: 0.65-0.76x
on an H200). Why this design: it keeps every product inside one kernel (2.5 forward-matmuls of
work, where a separate dQ kernel, the Triton "two" variant, repeats S and dP: 3.5), and every piece
(TMA loads into rings, async wgmma from shared memory and registers, ``setmaxnreg``) is one the
forward runs. The TMA reduce-add is not in Gluon 3.6's Python API: ``_tma_reduce_add`` calls the
builder's ``create_async_tma_reduce`` (the op ``tl`` descriptors use for ``atomic_add``).

Inputs: the forward's o and float32 base-2 lse (B, H, N), and delta = rowsum(dO * O) from the Triton
preprocess kernel (``flash_attention_triton.attn_bwd_delta_kernel``). Causal: a consumer's key
block crosses the diagonal in one query block (masked); earlier query blocks it skips (waiting for
their tiles and freeing the slot, so that the ring's phases stay in step), or with ``dq_shared``
takes masked (the other consumer's dQ needs its zero dS there). Limits (``supported``):
capability 9.0, head dim 64/128, bf16/fp16, contiguous (B, H, N, D), N a multiple of 128.
"""
from __future__ import annotations

import dataclasses
import math

import torch
import triton
from triton._C.libtriton import ir
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import builtin
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from kernels.flash_attention import LOG2E
from kernels.flash_attention_gluon import DTYPES, MAX_REGS, REG_STEP, SM_REGISTERS, SM_SHARED_BYTES, wgmma_layout

#: consumer warpgroups of a program (the kernel's partitions are written for two)
CONSUMERS = 2
#: rows of the delta preprocess's programs (as triton_backward launches it)
DELTA_BLOCK = 128
#: the barriers' and compiler's share of shared memory beyond the tiles, kept free in Tiles.problem
SMEM_SLACK = 1024


@dataclasses.dataclass(frozen=True)
class Tiles:
    """One launch configuration: ``block_m`` queries per Q/dO tile, ``block_n`` keys per consumer
    warpgroup, ``stages`` ring slots, registers per thread after setmaxnreg for the consumers and the
    loader, ``dq_split``: dQ computed in that many column pieces (fewer registers), and
    ``dq_atomic``: dQ partials by ``gl.atomic_add`` instead of a TMA reduce-add, ``dq_shared``: each
    consumer computes half of dQ's columns over both consumers' dS (half the global adds), ``dk_smem_a``:
    dK's MMA reads dS^T from shared memory rather than registers."""
    block_m: int
    block_n: int
    stages: int
    consumer_regs: int
    loader_regs: int
    dq_split: int = 1
    dq_atomic: bool = False
    dq_shared: bool = False
    dk_smem_a: bool = False

    def dq_cols(self, head_dim: int) -> int:
        """Columns of one dQ piece: with ``dq_shared`` each consumer's half over both consumers' keys,
        else one of ``dq_split`` pieces over the consumer's own keys."""
        return head_dim // (CONSUMERS if self.dq_shared else self.dq_split)

    @property
    def keys(self) -> int:
        """Keys of one program."""
        return CONSUMERS * self.block_n

    def smem_bytes(self, head_dim: int, element_bytes: int = 2) -> int:
        """Shared memory of the tiles: K, V, the Q/dO ring, each consumer's dS^T and dQ staging."""
        kv = 2 * self.keys * head_dim * element_bytes
        ring = 2 * self.stages * self.block_m * (head_dim * element_bytes + 4)  # + lse, delta rows
        ds = CONSUMERS * self.block_n * self.block_m * element_bytes
        pieces = 1 if self.dq_shared else self.dq_split
        dq = 0 if self.dq_atomic else CONSUMERS * pieces * self.block_m * self.dq_cols(head_dim) * 4
        return kv + ring + ds + dq

    def problem(self, head_dim: int, element_bytes: int = 2) -> str | None:
        """Why these tiles cannot run at ``head_dim``, or None."""
        if self.block_n != 64 or self.block_m not in (64, 128) or self.stages < 2:
            return f"block_n {self.block_n} not 64, block_m {self.block_m} not 64/128, or fewer than 2 stages"
        if self.dq_split not in (1, 2) or self.dq_cols(head_dim) % 32 or (self.dq_shared and self.dq_split != 1):
            return f"dq_split {self.dq_split} not 1/2 (1 with dq_shared) with pieces of a multiple of 32 columns"
        regs = (self.consumer_regs, self.loader_regs)
        if any(r % REG_STEP or not 24 <= r <= MAX_REGS for r in regs):
            return f"register counts {regs} not multiples of {REG_STEP} in 24..{MAX_REGS}"
        if CONSUMERS * 128 * self.consumer_regs + 128 * self.loader_regs > SM_REGISTERS:
            return f"{CONSUMERS} x 128 x {self.consumer_regs} + 128 x {self.loader_regs} registers > 64K"
        smem = self.smem_bytes(head_dim, element_bytes)
        if smem + SMEM_SLACK > SM_SHARED_BYTES:
            return f"{smem} bytes of tiles > {SM_SHARED_BYTES - SMEM_SLACK}"
        return None

    def takes(self, n: int) -> bool:
        """Whole programs of keys and whole query tiles."""
        return n > 0 and n % self.keys == 0 and n % self.block_m == 0


#: per head dim, the fastest of the variants docs/kernels/gluon_bwd_bench.py times (H200, 2026-11-28;
#: docs/kernels/flash_attention_gluon.md): both share dQ (half the global adds); D64 takes 128-query
#: tiles (half the steps, 1.13-1.16x over 64 without a mask), D128 64 (two ring stages: three were
#: slower)
DEFAULT_TILES = {64: Tiles(128, 64, 2, 240, 24, dq_shared=True), 128: Tiles(64, 64, 2, 240, 24, dq_shared=True)}


def tiles_for(head_dim: int, causal: bool) -> Tiles:
    """The tiles ``backward`` runs without ``tiles``."""
    return DEFAULT_TILES[head_dim]


@builtin
def _tma_reduce_add(tensor_desc, coord, src, _semantic=None):
    """global[coord...] += shared ``src`` by TMA (cp.reduce.async.bulk.tensor .add); completes like a
    TMA store (``tma.store_wait``)."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord, src.handle)


# ----------------------------------------------------------------------------------------------
# partitions
# ----------------------------------------------------------------------------------------------
@gluon.jit
def _loader(q_desc, do_desc, k_desc, v_desc, lse_desc, delta_desc, k_smem, v_smem, kv_bars, ring, kv_row, q_row0,
            n_blocks):
    """Each consumer's K and V, then Q_i with its lse rows and dO_i with its delta rows for i < n_blocks
    through the ring."""
    q_smem, do_smem, lse_smem, delta_smem, q_ready, do_ready, empty = ring
    CONSUMERS: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    NUM_STAGES: gl.constexpr = q_smem.shape[0]
    BLOCK_M: gl.constexpr = q_smem.shape[1]
    for c in gl.static_range(CONSUMERS):
        mbarrier.expect(kv_bars.index(c), k_desc.block_type.nbytes + v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [kv_row + c * BLOCK_N, 0], kv_bars.index(c), k_smem.index(c))
        tma.async_copy_global_to_shared(v_desc, [kv_row + c * BLOCK_N, 0], kv_bars.index(c), v_smem.index(c))
    for i in range(n_blocks):
        stage = i % NUM_STAGES
        # a fresh mbarrier counts its (virtual) previous phase as complete: the first round passes
        free_phase = ((i // NUM_STAGES) & 1) ^ 1
        row = q_row0 + i * BLOCK_M
        mbarrier.wait(empty.index(stage), free_phase)
        mbarrier.expect(q_ready.index(stage), q_desc.block_type.nbytes + lse_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [row, 0], q_ready.index(stage), q_smem.index(stage))
        tma.async_copy_global_to_shared(lse_desc, [row], q_ready.index(stage), lse_smem.index(stage))
        mbarrier.expect(do_ready.index(stage), do_desc.block_type.nbytes + delta_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(do_desc, [row, 0], do_ready.index(stage), do_smem.index(stage))
        tma.async_copy_global_to_shared(delta_desc, [row], do_ready.index(stage), delta_smem.index(stage))


@gluon.jit
def _skip(i, ring):
    """Query block i lies wholly before this consumer's keys (causal): free its slot once filled
    (arriving earlier could complete the slot's previous round)."""
    q_smem, do_smem, lse_smem, delta_smem, q_ready, do_ready, empty = ring
    NUM_STAGES: gl.constexpr = q_smem.shape[0]
    stage = i % NUM_STAGES
    phase = (i // NUM_STAGES) & 1
    mbarrier.wait(q_ready.index(stage), phase)
    mbarrier.wait(do_ready.index(stage), phase)
    mbarrier.arrive(empty.index(stage), count=1)


@gluon.jit
def _add_dq(dq, dq_smem, dq_desc, DQ, row, col, HEAD_DIM: gl.constexpr, DQ_ATOMIC: gl.constexpr):
    """global dQ accumulator rows [row, row + BLOCK_M), columns from col, += dq (float32). The TMA
    reduce stages dq in ``dq_smem``, which the caller has seen free (``tma.store_wait``)."""
    if DQ_ATOMIC:
        BLOCK_M: gl.constexpr = dq.shape[0]
        COLS: gl.constexpr = dq.shape[1]
        rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, dq.type.layout))
        cols = gl.arange(0, COLS, layout=gl.SliceLayout(0, dq.type.layout))
        base = DQ + row.to(gl.int64) * HEAD_DIM + col
        gl.atomic_add(base + (rows[:, None] * HEAD_DIM + cols[None, :]), dq, sem="relaxed")
    else:
        dq_smem.store(dq)
        fence_async_shared()
        _tma_reduce_add(dq_desc, [row, col], dq_smem)


@gluon.jit
def _dq_shared(i, k_all, ds_all, ds_bars, dq_smem, dq_desc, DQ, row, sm_scale, ME: gl.constexpr,
               DQ_ATOMIC: gl.constexpr, dq_layout: gl.constexpr):
    """dQ columns [ME * DQ_COLS, +DQ_COLS) of query block i over both consumers' keys, once both dS^T
    are in shared memory (ds_ready); ds_free tells the other consumer its dS^T and K were read."""
    ds_ready, ds_free = ds_bars
    BLOCK_M: gl.constexpr = ds_all.shape[2]
    HEAD_DIM: gl.constexpr = k_all.shape[2]
    DQ_COLS: gl.constexpr = dq_smem.shape[2]
    mbarrier.wait(ds_ready, i & 1)
    if not DQ_ATOMIC:
        tma.store_wait(0)
    dq = warpgroup_mma(ds_all.index(0).permute((1, 0)), k_all.index(0).slice(ME * DQ_COLS, DQ_COLS, dim=1),
                       gl.zeros([BLOCK_M, DQ_COLS], gl.float32, dq_layout), use_acc=False, is_async=True)
    dq = warpgroup_mma(ds_all.index(1).permute((1, 0)), k_all.index(1).slice(ME * DQ_COLS, DQ_COLS, dim=1), dq,
                       is_async=True)
    dq = warpgroup_mma_wait(0, deps=(dq, ))
    mbarrier.arrive(ds_free, count=1)
    _add_dq(dq * sm_scale, dq_smem.index(0), dq_desc, DQ, row, ME * DQ_COLS, HEAD_DIM, DQ_ATOMIC)


@gluon.jit
def _step(i, dk, dv, k_all, v_tile, ds_all, ds_bars, dq_smem, ring, dq_desc, DQ, q_row0, q_pos0, k_pos,
          qk_scale, sm_scale, ME: gl.constexpr, MASK: gl.constexpr, DQ_ATOMIC: gl.constexpr,
          DQ_SHARED: gl.constexpr, DK_SMEM_A: gl.constexpr, s_layout: gl.constexpr, kv_layout: gl.constexpr,
          dq_layout: gl.constexpr):
    """Query block i (rows q_row0 + i * BLOCK_M): dV += P^T dO, dK += dS^T Q, dQ += dS K, for the keys
    of consumer ME (K tile ``k_all.index(ME)``, dS^T buffer ``ds_all.index(ME)``)."""
    q_smem, do_smem, lse_smem, delta_smem, q_ready, do_ready, empty = ring
    k_tile = k_all.index(ME)
    ds_smem = ds_all.index(ME)
    NUM_STAGES: gl.constexpr = q_smem.shape[0]
    BLOCK_M: gl.constexpr = q_smem.shape[1]
    HEAD_DIM: gl.constexpr = q_smem.shape[2]
    BLOCK_N: gl.constexpr = k_tile.shape[0]
    dtype: gl.constexpr = q_smem.dtype
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=kv_layout, k_width=2)
    stage = i % NUM_STAGES
    phase = (i // NUM_STAGES) & 1
    q_tile = q_smem.index(stage)
    do_tile = do_smem.index(stage)

    mbarrier.wait(q_ready.index(stage), phase)
    st = warpgroup_mma(k_tile, q_tile.permute((1, 0)), gl.zeros([BLOCK_N, BLOCK_M], gl.float32, s_layout),
                       use_acc=False, is_async=True)
    mbarrier.wait(do_ready.index(stage), phase)
    dpt = warpgroup_mma(v_tile, do_tile.permute((1, 0)), gl.zeros([BLOCK_N, BLOCK_M], gl.float32, s_layout),
                        use_acc=False, is_async=True)
    # the per-query lse and delta rows come from shared memory just when needed: held in registers
    # across the MMA waits they cost D128 32 registers and spills
    row_layout: gl.constexpr = gl.SliceLayout(0, s_layout)
    st = warpgroup_mma_wait(1, deps=(st, ))
    pt = gl.exp2(st * qk_scale - lse_smem.index(stage).load(row_layout)[None, :])
    if MASK:
        keys = k_pos + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_layout))
        queries = q_pos0 + i * BLOCK_M + gl.arange(0, BLOCK_M, layout=row_layout)
        pt = gl.where(queries[None, :] >= keys[:, None], pt, 0.0)
    # dV's MMA goes out before dP^T is waited for (without it ptxas spills at D128)
    p_op = gl.convert_layout(pt.to(dtype), op_layout)
    dv = warpgroup_mma(p_op, do_tile, dv, is_async=True)
    dpt, dv = warpgroup_mma_wait(1, deps=(dpt, dv))
    dst = (pt * (dpt - delta_smem.index(stage).load(row_layout)[None, :])).to(dtype)
    # dS^T through shared memory: dQ = dS K takes it as a transposed A operand; shared, the other
    # consumer must have read the previous block's first (ds_free)
    if DQ_SHARED:
        mbarrier.wait(ds_bars[1], (i & 1) ^ 1)
    ds_smem.store(dst)
    fence_async_shared()
    if DQ_SHARED:
        mbarrier.arrive(ds_bars[0], count=1)
    if DK_SMEM_A:  # dS^T as the A operand from the shared memory it was stored to, not from registers
        dk = warpgroup_mma(ds_smem, q_tile, dk, is_async=True)
        dv, dk, p_op = warpgroup_mma_wait(0, deps=(dv, dk, p_op))
    else:
        ds_op = gl.convert_layout(dst, op_layout)
        dk = warpgroup_mma(ds_op, q_tile, dk, is_async=True)
        dv, dk, p_op, ds_op = warpgroup_mma_wait(0, deps=(dv, dk, p_op, ds_op))
    mbarrier.arrive(empty.index(stage), count=1)
    if DQ_SHARED:
        _dq_shared(i, k_all, ds_all, ds_bars, dq_smem, dq_desc, DQ, q_row0 + i * BLOCK_M, sm_scale, ME, DQ_ATOMIC,
                   dq_layout)
    else:
        # dQ in DQ_SPLIT column pieces (D128: two of 64, so that its accumulator beside dK and dV does
        # not spill), each added to the global accumulator once the previous reduces have read their
        # staging buffers
        DQ_SPLIT: gl.constexpr = dq_smem.shape[0]
        DQ_COLS: gl.constexpr = dq_smem.shape[2]
        if not DQ_ATOMIC:
            tma.store_wait(0)
        for h in gl.static_range(DQ_SPLIT):
            dq = warpgroup_mma(ds_smem.permute((1, 0)), k_tile.slice(h * DQ_COLS, DQ_COLS, dim=1),
                               gl.zeros([BLOCK_M, DQ_COLS], gl.float32, dq_layout), use_acc=False, is_async=True)
            dq = warpgroup_mma_wait(0, deps=(dq, ))
            _add_dq(dq * sm_scale, dq_smem.index(h), dq_desc, DQ, q_row0 + i * BLOCK_M, h * DQ_COLS, HEAD_DIM,
                    DQ_ATOMIC)
    return dk, dv


@gluon.jit
def _consumer(k_all, v_tile, kv_bar, ds_all, ds_bars, dq_smem, ring, dq_desc, dk_desc, dv_desc, DQ, k_row,
              q_row0, q_pos0, k_pos, n_blocks, qk_scale, sm_scale, ME: gl.constexpr, CAUSAL: gl.constexpr,
              SKIP: gl.constexpr, DQ_ATOMIC: gl.constexpr, DQ_SHARED: gl.constexpr, DK_SMEM_A: gl.constexpr):
    """dK, dV of consumer ME's BLOCK_N keys at row k_row (position k_pos) over n_blocks query blocks
    from row q_row0 (position q_pos0); causal: SKIP blocks wholly before the keys, then one masked
    block. With DQ_SHARED both consumers take every block in step (the skipped ones masked: the other
    consumer's dQ needs this one's dS^T, zero there)."""
    q_smem, do_smem, lse_smem, delta_smem, q_ready, do_ready, empty = ring
    k_tile = k_all.index(ME)
    BLOCK_M: gl.constexpr = q_smem.shape[1]
    BLOCK_N: gl.constexpr = k_tile.shape[0]
    HEAD_DIM: gl.constexpr = k_tile.shape[1]
    dtype: gl.constexpr = k_tile.dtype
    s_layout: gl.constexpr = wgmma_layout(BLOCK_M)
    kv_layout: gl.constexpr = wgmma_layout(HEAD_DIM)
    dq_layout: gl.constexpr = wgmma_layout(dq_smem.shape[2])
    dk = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, kv_layout)
    dv = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, kv_layout)
    mbarrier.wait(kv_bar, 0)
    if CAUSAL:
        if DQ_SHARED:
            for i in gl.static_range(SKIP + 1):
                dk, dv = _step(i, dk, dv, k_all, v_tile, ds_all, ds_bars, dq_smem, ring, dq_desc, DQ, q_row0,
                               q_pos0, k_pos, qk_scale, sm_scale, ME, True, DQ_ATOMIC, DQ_SHARED, DK_SMEM_A, s_layout,
                               kv_layout, dq_layout)
        else:
            for i in gl.static_range(SKIP):
                _skip(i, ring)
            dk, dv = _step(SKIP, dk, dv, k_all, v_tile, ds_all, ds_bars, dq_smem, ring, dq_desc, DQ, q_row0,
                           q_pos0, k_pos, qk_scale, sm_scale, ME, True, DQ_ATOMIC, DQ_SHARED, DK_SMEM_A, s_layout, kv_layout,
                           dq_layout)
        for i in range(SKIP + 1, n_blocks):
            dk, dv = _step(i, dk, dv, k_all, v_tile, ds_all, ds_bars, dq_smem, ring, dq_desc, DQ, q_row0,
                           q_pos0, k_pos, qk_scale, sm_scale, ME, False, DQ_ATOMIC, DQ_SHARED, DK_SMEM_A, s_layout,
                           kv_layout, dq_layout)
    else:
        for i in range(n_blocks):
            dk, dv = _step(i, dk, dv, k_all, v_tile, ds_all, ds_bars, dq_smem, ring, dq_desc, DQ, q_row0,
                           q_pos0, k_pos, qk_scale, sm_scale, ME, False, DQ_ATOMIC, DQ_SHARED, DK_SMEM_A, s_layout,
                           kv_layout, dq_layout)
    # K and V are no longer read (every MMA waited for; shared, the other consumer's last dQ too):
    # their buffers stage dK and dV for TMA stores
    if DQ_SHARED:
        mbarrier.wait(ds_bars[1], (n_blocks & 1) ^ 1)
    tma.store_wait(0)
    k_tile.store((dk * sm_scale).to(dtype))
    v_tile.store(dv.to(dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(dk_desc, [k_row, 0], k_tile)
    tma.async_copy_shared_to_global(dv_desc, [k_row, 0], v_tile)
    tma.store_wait(0)


# ----------------------------------------------------------------------------------------------
# kernel
# ----------------------------------------------------------------------------------------------
@gluon.jit
def attn_bwd_kernel(q_desc, k_desc, v_desc, do_desc, dq_desc, dk_desc, dv_desc, lse_desc, delta_desc, DQ, qk_scale,
                    sm_scale, N, NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                    LOADER_REGS: gl.constexpr, DQ_ATOMIC: gl.constexpr, DQ_SHARED: gl.constexpr,
                    DK_SMEM_A: gl.constexpr):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    KEYS: gl.constexpr = 2 * BLOCK_N
    gl.static_assert(BLOCK_N <= BLOCK_M)  # one masked query block per consumer
    gl.static_assert(KEYS % BLOCK_M == 0)  # a program's first key starts a query block
    pid_n = gl.program_id(0)  # causal: key block 0 has the most query blocks and starts first
    off_hz = gl.program_id(1)
    kv_pos = pid_n * KEYS
    kv_row = off_hz * N + kv_pos
    if CAUSAL:
        q_pos0 = kv_pos
    else:
        q_pos0 = 0
    q_row0 = off_hz * N + q_pos0
    n_blocks = (N - q_pos0) // BLOCK_M

    dtype: gl.constexpr = q_desc.dtype
    k_smem = gl.allocate_shared_memory(dtype, [2] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [2] + v_desc.block_type.shape, v_desc.layout)
    q_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES] + q_desc.block_type.shape, q_desc.layout)
    do_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES] + do_desc.block_type.shape, do_desc.layout)
    ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_M], dtype)
    ds_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, BLOCK_M], ds_layout)
    # each consumer's dQ staging buffers, one per column piece (DQ_ATOMIC: shapes only, never used)
    DQ_COLS: gl.constexpr = dq_desc.block_type.shape[1]
    if DQ_SHARED:
        DQ_SPLIT: gl.constexpr = 1
    else:
        DQ_SPLIT: gl.constexpr = HEAD_DIM // DQ_COLS
    if DQ_ATOMIC:
        dq_shape: gl.constexpr = [DQ_SPLIT, 1, DQ_COLS]
        dq_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    else:
        dq_shape: gl.constexpr = [DQ_SPLIT] + dq_desc.block_type.shape
        dq_layout: gl.constexpr = dq_desc.layout
    dq_smem0 = gl.allocate_shared_memory(gl.float32, dq_shape, dq_layout)
    dq_smem1 = gl.allocate_shared_memory(gl.float32, dq_shape, dq_layout)
    kv_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    do_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    # DQ_SHARED: both dS^T stored (ds_bars 0), both read by the dQ MMAs (1); one arrival per consumer
    ds_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(2):
        mbarrier.init(kv_bars.index(c), count=1)
        mbarrier.init(ds_bars.index(c), count=2)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(do_ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # one arrival per consumer

    lse_smem = gl.allocate_shared_memory(gl.float32, [NUM_STAGES] + lse_desc.block_type.shape, lse_desc.layout)
    delta_smem = gl.allocate_shared_memory(gl.float32, [NUM_STAGES] + delta_desc.block_type.shape, delta_desc.layout)
    ring = (q_smem, do_smem, lse_smem, delta_smem, q_ready, do_ready, empty)
    # consumer 1's keys start BLOCK_N later: causal, it skips the query blocks wholly before them
    SKIP1: gl.constexpr = BLOCK_N // BLOCK_M
    ds_pair = (ds_bars.index(0), ds_bars.index(1))
    gl.warp_specialize([
        (_consumer, (k_smem, v_smem.index(0), kv_bars.index(0), ds_smem, ds_pair, dq_smem0, ring, dq_desc,
                     dk_desc, dv_desc, DQ, kv_row, q_row0, q_pos0, kv_pos, n_blocks, qk_scale, sm_scale, 0,
                     CAUSAL, 0, DQ_ATOMIC, DQ_SHARED, DK_SMEM_A)),
        (_consumer, (k_smem, v_smem.index(1), kv_bars.index(1), ds_smem, ds_pair, dq_smem1, ring, dq_desc,
                     dk_desc, dv_desc, DQ, kv_row + BLOCK_N, q_row0, q_pos0, kv_pos + BLOCK_N, n_blocks,
                     qk_scale, sm_scale, 1, CAUSAL, SKIP1, DQ_ATOMIC, DQ_SHARED, DK_SMEM_A)),
        (_loader, (q_desc, do_desc, k_desc, v_desc, lse_desc, delta_desc, k_smem, v_smem, kv_bars, ring, kv_row,
                   q_row0, n_blocks)),
    ], [4, 1], [CONSUMER_REGS, LOADER_REGS])

    for c in gl.static_range(2):
        mbarrier.invalidate(kv_bars.index(c))
        mbarrier.invalidate(ds_bars.index(c))
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(q_ready.index(i))
        mbarrier.invalidate(do_ready.index(i))
        mbarrier.invalidate(empty.index(i))


# ----------------------------------------------------------------------------------------------
# host
# ----------------------------------------------------------------------------------------------
def supported(q: torch.Tensor, causal: bool = False) -> bool:
    """Whether ``backward`` takes this case (``causal`` either way) with its default tiles; the rest
    is the Triton kernel's."""
    if q.device.type != "cuda" or q.dim() != 4 or not q.is_contiguous():
        return False
    B, H, N, D = q.shape
    return (torch.cuda.get_device_capability(q.device) == (9, 0) and D in DEFAULT_TILES and q.dtype in DTYPES
            and tiles_for(D, causal).takes(N))


def descriptors(q, k, v, do, dq_acc, dk, dv, lse, delta, head_dim: int, tiles: Tiles):
    """TMA descriptors of the (B*H*N, D) views: q, do of block_m rows, k, v, dk, dv of block_n,
    the float32 dQ accumulator of block_m; and of lse and delta as (B*H*N,) vectors, block_m rows."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    def desc(t, rows, cols=head_dim):
        layout = gl.NVMMASharedLayout.get_default_for([rows, cols], DTYPES.get(t.dtype, gl.float32))
        return TensorDescriptor.from_tensor(t.view(-1, head_dim), [rows, cols], layout)

    def rows(t):
        layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)
        return TensorDescriptor.from_tensor(t.view(-1), [tiles.block_m], layout)

    m, n = tiles.block_m, tiles.block_n
    return (desc(q, m), desc(k, n), desc(v, n), desc(do, m), desc(dq_acc, m, tiles.dq_cols(head_dim)),
            desc(dk, n), desc(dv, n), rows(lse), rows(delta))


def _constexprs(tiles: Tiles, causal: bool) -> dict:
    return dict(NUM_STAGES=tiles.stages, CAUSAL=bool(causal), CONSUMER_REGS=tiles.consumer_regs,
                LOADER_REGS=tiles.loader_regs, DQ_ATOMIC=bool(tiles.dq_atomic), DQ_SHARED=bool(tiles.dq_shared),
                DK_SMEM_A=bool(tiles.dk_smem_a))


def delta(o: torch.Tensor, do: torch.Tensor) -> torch.Tensor:
    """rowsum(dO * O) in float32 (B, H, N), by the Triton backward's preprocess kernel."""
    from kernels import flash_attention_triton as fat

    B, H, N, D = o.shape
    out = torch.empty((B, H, N), device=o.device, dtype=torch.float32)
    fat.attn_bwd_delta_kernel[(triton.cdiv(N, DELTA_BLOCK), B * H)](o, do, out, N, HEAD_DIM=D, BLOCK_M=DELTA_BLOCK)
    return out


def backward(q, k, v, o, lse, do, causal: bool, sm_scale: float | None = None, tiles: Tiles | None = None):
    """dq, dk, dv from contiguous saved tensors (q, k, v, o of shape (B, H, N, D), lse float32 base 2)
    and dO, where ``supported``: the contract of ``flash_attention.triton_backward``. ``tiles``
    (default ``tiles_for(D, causal)``): another launch configuration, for sweeps; a ValueError when it
    cannot run this case."""
    B, H, N, D = q.shape
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    tiles = tiles or tiles_for(D, causal)
    problem = tiles.problem(D, q.element_size()) or (None if tiles.takes(N) else
                                                      f"N {N} not a multiple of {tiles.keys} and {tiles.block_m}")
    if problem:
        raise ValueError(f"flash_attention_gluon_bwd.backward: {tiles}: {problem}")
    do = do.contiguous()
    dq_acc = torch.zeros(q.shape, device=q.device, dtype=torch.float32)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    grid = (N // tiles.keys, B * H)
    descs = descriptors(q, k, v, do, dq_acc, dk, dv, lse, delta(o, do), D, tiles)
    attn_bwd_kernel[grid](*descs, dq_acc, sm_scale * LOG2E, sm_scale, N, **_constexprs(tiles, causal), num_warps=4)
    return dq_acc.to(q.dtype), dk, dv


def compile_only(head_dim: int, causal: bool, dtype: torch.dtype = torch.bfloat16, arch: int = 90,
                 tiles: Tiles | None = None):
    """Compile the kernel for sm_``arch`` without a GPU (CPU tensors stand in for the data): Triton's
    CompiledKernel, whose ``asm`` holds the ttgir, ptx and cubin."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import mangle_type

    tiles = tiles or tiles_for(head_dim, causal)
    x = torch.empty((1, 1, 4 * tiles.keys, head_dim), dtype=dtype)
    acc = torch.empty(x.shape, dtype=torch.float32)
    rows = torch.empty(x.shape[:-1], dtype=torch.float32)
    descs = descriptors(x, x, x, x, acc, x, x, rows, rows, head_dim, tiles)
    names = ["q_desc", "k_desc", "v_desc", "do_desc", "dq_desc", "dk_desc", "dv_desc", "lse_desc", "delta_desc"]
    signature = {name: mangle_type(d) for name, d in zip(names, descs)}
    signature.update(DQ="*fp32", qk_scale="fp32", sm_scale="fp32", N="i32")
    constexprs = _constexprs(tiles, causal)
    signature.update({name: "constexpr" for name in constexprs})
    src = GluonASTSource(attn_bwd_kernel, signature, constexprs=constexprs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=dict(num_warps=4))
