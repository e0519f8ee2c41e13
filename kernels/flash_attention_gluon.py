"""A Hopper (sm_90a) FlashAttention forward in Gluon, FlashAttention-3 style (issue 47, prototype).

One program takes 2 * BLOCK_M query rows of one (batch, head) and runs three partitions
(``gl.warp_specialize``):

- a loader warp: Q of both consumers once, then K and V tiles by TMA into two NUM_STAGES-deep
  shared-memory rings (K and V apart, so a K slot is free as soon as its S is computed), each slot
  with a "ready" mbarrier (TMA bytes) and an "empty" one (one arrival per consumer);
- two consumer warpgroups (the default partition and a 4-warp worker), each owning BLOCK_M rows:
  S = Q K^T by an async ``warpgroup_mma`` from shared memory, the online softmax in registers with
  exp2 (scores scaled by sm_scale*log2(e), one FMA each), P cast to the input dtype and kept in
  registers as the A operand (``DotOperandLayout``) of O += P V.

Within a consumer the loop is software pipelined as in FlashAttention-3: iteration j issues
S_j = Q K_j^T and then O += P_{j-1} V_{j-1}, waits for S_j only (``warpgroup_mma_wait(1)``), runs the
softmax of tile j in float32 (meant to overlap P_{j-1} V_{j-1}), waits for it, rescales O and casts
P_j into the registers that MMA was reading. With ``PINGPONG`` the consumers take turns to issue
their MMAs (an mbarrier each), so that one's softmax runs under the other's MMAs (FA3's inter-
warpgroup ping-pong). In the sm_90a SASS (ptxas of CUDA 12.8) the wait for P V is scheduled ahead
of the exponentials despite the PTX order, so the overlap within a warpgroup may not happen.

Outputs: o, and the float32 log-sum-exp in base 2 (``m + log2(l)`` of the scaled scores), as
``flash_attention_triton.attn_fwd_kernel`` stores it, so that its backward can be reused.

Prototype limits (``supported``): an H100/H200 (capability 9.0), head dim 64 or 128, bf16/fp16,
contiguous (B, H, N, D) inputs with N a multiple of ``ROWS_PER_PROGRAM`` (128); everything else is
for the Triton kernel. The tensors are seen as (B*H*N, D) matrices by host-side TMA descriptors, so
a tile never crosses a head.

``forward(..., tiles=Tiles(...))`` runs another launch configuration, for sweeps
(docs/kernels/gluon_fwd_sweep.py): 2 or 3 consumers, 64 or 128 rows each, other key tiles, stages,
ping-pong and register splits; N then needs only be a multiple of the key tile and of a consumer's
rows (the consumers of the one ragged program whose rows lie outside the sequence load and
compute nothing: ``Tiles.skip_idle``).
"""
from __future__ import annotations

import dataclasses
import math

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernels.flash_attention import LOG2E

#: rows of one consumer warpgroup (a 64-row wgmma M tile: S and O stay within 64 registers each)
BLOCK_M = 64
CONSUMERS = 2
ROWS_PER_PROGRAM = CONSUMERS * BLOCK_M
#: per head dim: (BLOCK_N, NUM_STAGES). D128 holds 2 stages of K and V (128 KB) beside Q (32 KB);
#: 3 would not fit in 227 KB of shared memory.
CONFIGS = {64: (128, 3), 128: (128, 2)}
#: registers per thread after setmaxnreg: consumers grow, the loader shrinks (FA3's split;
#: 2*128*240 + 128*24 <= 64K registers of an SM)
CONSUMER_REGS = 240
LOADER_REGS = 24
#: alternate the two consumers' MMA issues (FA3's inter-warpgroup ping-pong), so that one's softmax
#: runs under the other's MMAs: off, it ran slower in 3 of 4 cases (docs/kernels/flash_attention_gluon.md)
PINGPONG = False
DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}
#: setmaxnreg takes multiples of 8 registers, and a thread has at most 256
REG_STEP = 8
MAX_REGS = 256
SM_REGISTERS = 64 * 1024
SM_SHARED_BYTES = 227 * 1024
#: consumer warpgroups the kernel can run (2 or 3: FA3 runs three 64-row ones at head dim 64)
CONSUMER_COUNTS = (2, 3)


@dataclasses.dataclass(frozen=True)
class Tiles:
    """One launch configuration: ``block_m`` rows per consumer warpgroup (64, or 128 as two wgmma
    M tiles), ``consumers`` warpgroups (``CONSUMER_COUNTS``), ``block_n`` keys per K/V tile,
    ``stages`` ring slots, FA3 ping-pong, and the registers per thread that setmaxnreg gives each
    consumer and the loader. ``launch_regs``: the kernel's register bound at launch (``maxnreg``),
    low enough for two programs an SM where the tiles leave room. ``skip_idle`` (ignored with
    ping-pong, whose turns count every consumer's blocks): where the tiles' rows do not divide N, the
    consumers of the one ragged program whose rows lie outside the sequence load and read nothing,
    and a causal launch places that program at the sequence's start, where it has the fewest key
    blocks; off, it runs last and its idle consumers compute every block. ``forward`` without tiles
    runs ``tiles_for``'s."""
    block_m: int
    consumers: int
    block_n: int
    stages: int
    pingpong: bool
    consumer_regs: int
    loader_regs: int
    launch_regs: int | None = None
    skip_idle: bool = True

    @property
    def rows(self) -> int:
        """Query rows of one program."""
        return self.block_m * self.consumers

    def problem(self, head_dim: int, element_bytes: int = 2) -> str | None:
        """Why these tiles cannot run at ``head_dim`` (registers, shared memory, shapes), or None."""
        if self.consumers not in CONSUMER_COUNTS or self.block_m not in (64, 128):
            return f"consumers {self.consumers} not in {CONSUMER_COUNTS} or block_m {self.block_m} not 64/128"
        if self.block_n % 16 or not 16 <= self.block_n <= 256 or self.stages < 2:
            return f"block_n {self.block_n} not a multiple of 16 in 16..256, or fewer than 2 stages"
        regs = (self.consumer_regs, self.loader_regs)
        if any(r % REG_STEP or not 24 <= r <= MAX_REGS for r in regs):
            return f"register counts {regs} not multiples of {REG_STEP} in 24..{MAX_REGS}"
        # the loader's one warp holds a whole warpgroup's registers
        wanted = self.consumers * 128 * self.consumer_regs + 128 * self.loader_regs
        if wanted > SM_REGISTERS:
            return f"{self.consumers} x 128 x {self.consumer_regs} + 128 x {self.loader_regs} registers > 64K"
        # setmaxnreg moves registers within the program's pool: launch bound x its warpgroups' threads
        if self.launch_regs and (self.launch_regs % REG_STEP or wanted > self.launch_regs * 128 * (self.consumers + 1)):
            return f"launch_regs {self.launch_regs} not a multiple of {REG_STEP} or below the partitions' {wanted} registers"
        smem = element_bytes * head_dim * (self.rows + 2 * self.stages * self.block_n)
        if smem > SM_SHARED_BYTES:
            return f"{smem} bytes of Q and K/V ring > {SM_SHARED_BYTES}"
        return None

    def takes(self, n: int) -> bool:
        """Whether a sequence of ``n`` fits the tiles: whole K/V tiles and whole consumer tiles (a
        ragged program's consumers outside the sequence store nothing)."""
        return n > 0 and n % self.block_n == 0 and n % self.block_m == 0


def default_tiles(head_dim: int) -> Tiles:
    """The two-consumer tiles of the module constants above."""
    block_n, stages = CONFIGS[head_dim]
    return Tiles(BLOCK_M, CONSUMERS, block_n, stages, PINGPONG, CONSUMER_REGS, LOADER_REGS)


#: D64 sequences from SHORT_D64_FROM_N up to SHORT_D64_BELOW_N take the Triton kernel: its short
#: key loops ran faster there (N 1,024), the Gluon kernel's at N 128 and from 2,048 on.
SHORT_D64_FROM_N, SHORT_D64_BELOW_N = 256, 2048
#: D64 from these lengths on, without a mask / causal: three 64-row consumers (FA3's layout for that
#: head dim), 160 registers each. On an H200 they ran faster than two consumers from these lengths
#: and level with them at causal N 2,048 (docs/kernels/flash_attention_gluon.md, "The ragged program
#: and the masked block").
D64_WIDE_FROM_N = {False: SHORT_D64_BELOW_N, True: 4096}
D64_WIDE_TILES = Tiles(64, 3, 128, 3, False, 160, 24)


def tiles_for(head_dim: int, causal: bool, n: int) -> Tiles:
    """The tiles ``forward`` runs without ``tiles`` at sequence length ``n``."""
    if head_dim == 64 and n >= D64_WIDE_FROM_N[bool(causal)]:
        return D64_WIDE_TILES
    return default_tiles(head_dim)


# ----------------------------------------------------------------------------------------------
# partitions
# ----------------------------------------------------------------------------------------------
@gluon.constexpr_function
def wgmma_layout(n):
    """The accumulator layout of one warpgroup's wgmma of ``n`` columns (instructions 16 x n x 16)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, n, 16])


@gluon.jit
def _loader(q_desc, k_desc, v_desc, q_smem, q_bars, ring, q_row, q_pos, N, kv_row, n_blocks,
            SKIP_IDLE: gl.constexpr):
    """Q of every consumer (``SKIP_IDLE``: of those whose rows lie in the sequence), then K_i and V_i
    for i < n_blocks through the rings."""
    k_smem, v_smem, k_ready, k_empty, v_ready, v_empty = ring
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    CONSUMERS: gl.constexpr = q_smem.shape[0]
    NUM_STAGES: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    for c in gl.static_range(CONSUMERS):
        pos = q_pos + c * BLOCK_M
        if (not SKIP_IDLE) or ((pos >= 0) & (pos < N)):
            mbarrier.expect(q_bars.index(c), q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [q_row + c * BLOCK_M, 0], q_bars.index(c), q_smem.index(c))
    for i in range(n_blocks):
        stage = i % NUM_STAGES
        # a fresh mbarrier counts its (virtual) previous phase as complete: the first round passes
        free_phase = ((i // NUM_STAGES) & 1) ^ 1
        row = kv_row + i * BLOCK_N
        mbarrier.wait(k_empty.index(stage), free_phase)
        mbarrier.expect(k_ready.index(stage), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [row, 0], k_ready.index(stage), k_smem.index(stage))
        mbarrier.wait(v_empty.index(stage), free_phase)
        mbarrier.expect(v_ready.index(stage), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(v_desc, [row, 0], v_ready.index(stage), v_smem.index(stage))


@gluon.jit
def _softmax(s, m_i, l_i, qk_scale, q_pos, k_pos, MASK: gl.constexpr):
    """Online softmax of one S tile: (P in float32, new max, new sum, alpha)."""
    BLOCK_M: gl.constexpr = s.shape[0]
    BLOCK_N: gl.constexpr = s.shape[1]
    if MASK:
        rows = q_pos + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s.type.layout))
        cols = k_pos + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s.type.layout))
        # m_new stays finite: every row keeps key 0 or an earlier max
        s = gl.where(rows[:, None] >= cols[None, :], s, float("-inf"))
    # the scale folded into the exponent: one FMA per score
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    s = s * qk_scale - m_new[:, None]
    p = gl.exp2(s)
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, m_new, l_i, alpha


@gluon.jit
def _take_turn(sched, k, PINGPONG: gl.constexpr):
    """Ping-pong (FA3): before issuing its MMA group k, a consumer waits until the one before it in the
    ring has issued its group k (consumers 1..) or k-1 (consumer 0, whose first wait passes: a fresh
    mbarrier's previous phase counts as complete). ``sched``: (own barrier, the next consumer's, 1 for
    consumer 0 else 0)."""
    mine, other, phase0 = sched
    if PINGPONG:
        mbarrier.wait(mine, (k & 1) ^ phase0)


@gluon.jit
def _pass_turn(sched, PINGPONG: gl.constexpr):
    mine, other, phase0 = sched
    if PINGPONG:
        mbarrier.arrive(other, count=1)


@gluon.jit
def _step(j, o, p, m_i, l_i, q_smem, ring, sched, qk_scale, q_pos, MASK: gl.constexpr, PINGPONG: gl.constexpr,
          s_layout: gl.constexpr, o_layout: gl.constexpr):
    """Key block j: S_j = Q K_j^T, then O += P_{j-1} V_{j-1} while the softmax of S_j runs."""
    k_smem, v_smem, k_ready, k_empty, v_ready, v_empty = ring
    BLOCK_M: gl.constexpr = q_smem.shape[0]
    NUM_STAGES: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    stage = j % NUM_STAGES
    prev = (j - 1) % NUM_STAGES
    k_tile = k_smem.index(stage)
    v_tile = v_smem.index(prev)
    mbarrier.wait(k_ready.index(stage), (j // NUM_STAGES) & 1)
    mbarrier.wait(v_ready.index(prev), ((j - 1) // NUM_STAGES) & 1)
    _take_turn(sched, j, PINGPONG)
    s = warpgroup_mma(q_smem, k_tile.permute((1, 0)), gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout),
                      use_acc=False, is_async=True)
    o = warpgroup_mma(p, v_tile, o, is_async=True)
    _pass_turn(sched, PINGPONG)
    # groups complete in order: at most one outstanding means S_j is done, P V may still run
    s = warpgroup_mma_wait(1, deps=(s, ))
    mbarrier.arrive(k_empty.index(stage), count=1)
    p_new, m_new, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, q_pos, j * BLOCK_N, MASK)
    # The exponentials (float32, in S's registers) go through the wait so that the PTX computes them
    # while P V runs (ptxas may still hoist the wait: module doc); only the cast into P's registers,
    # which that MMA still reads, must follow it.
    o, p, p_new, l_i = warpgroup_mma_wait(0, deps=(o, p, p_new, l_i))
    mbarrier.arrive(v_empty.index(prev), count=1)
    o = o * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
    p_layout: gl.constexpr = p.type.layout
    return o, gl.convert_layout(p_new.to(p.dtype), p_layout), m_new, l_i


@gluon.jit
def _consumer(q_smem, q_bar, ring, sched, o_desc, LSE, q_row, q_pos, lse_row, n_blocks, qk_scale, N,
              CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, ONE_MASKED: gl.constexpr, TAIL: gl.constexpr,
              SKIP_IDLE: gl.constexpr):
    """One consumer warpgroup (_attend). ``SKIP_IDLE`` (a ``TAIL`` launch without ping-pong): a consumer
    of the ragged program whose rows lie outside the sequence passes every key block on unread."""
    if SKIP_IDLE:
        if (q_pos >= 0) & (q_pos < N):
            _attend(q_smem, q_bar, ring, sched, o_desc, LSE, q_row, q_pos, lse_row, n_blocks, qk_scale, N, CAUSAL,
                    PINGPONG, ONE_MASKED, TAIL)
        else:
            for j in range(n_blocks):
                _pass_block(j, ring)
    else:
        _attend(q_smem, q_bar, ring, sched, o_desc, LSE, q_row, q_pos, lse_row, n_blocks, qk_scale, N, CAUSAL,
                PINGPONG, ONE_MASKED, TAIL)


@gluon.jit
def _attend(q_smem, q_bar, ring, sched, o_desc, LSE, q_row, q_pos, lse_row, n_blocks, qk_scale, N,
            CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, ONE_MASKED: gl.constexpr, TAIL: gl.constexpr):
    """BLOCK_M query rows (global row q_row, position q_pos in the sequence) over n_blocks key blocks;
    ``ring``: the K/V buffers and their barriers, ``sched``: the ping-pong barriers (_take_turn).
    ``ONE_MASKED``: causal tiles where only the program's last key block crosses the diagonal;
    ``TAIL``: one program may hold consumers outside the sequence, which then store nothing."""
    k_smem, v_smem, k_ready, k_empty, v_ready, v_empty = ring
    BLOCK_M: gl.constexpr = q_smem.shape[0]
    HEAD_DIM: gl.constexpr = q_smem.shape[1]
    NUM_STAGES: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    dtype: gl.constexpr = q_smem.dtype
    s_layout: gl.constexpr = wgmma_layout(BLOCK_N)
    o_layout: gl.constexpr = wgmma_layout(HEAD_DIM)
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)

    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, row_s)
    l_i = gl.zeros([BLOCK_M], gl.float32, row_s)
    o = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)

    # key block 0
    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_ready.index(0), 0)
    _take_turn(sched, 0, PINGPONG)
    s = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout),
                      use_acc=False, is_async=True)
    _pass_turn(sched, PINGPONG)
    s = warpgroup_mma_wait(0, deps=(s, ))
    mbarrier.arrive(k_empty.index(0), count=1)
    if CAUSAL:
        # block 0 is masked only where the diagonal crosses it
        if q_pos < BLOCK_N:
            p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, q_pos, 0, True)
        else:
            p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, q_pos, 0, False)
    else:
        p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, q_pos, 0, False)
    p = gl.convert_layout(p.to(dtype), p_layout)

    # blocks left of the diagonal (all of them when not causal), then those the diagonal crosses
    if CAUSAL:
        if ONE_MASKED:
            n_unmasked = n_blocks - 1
        else:
            # every key of block j < q_pos // BLOCK_N precedes every row of this consumer
            n_unmasked = gl.minimum(gl.maximum(q_pos // BLOCK_N, 1), n_blocks)
    else:
        n_unmasked = n_blocks
    # the blocks this consumer reads: causal tiles of several masked blocks stop at the block of its
    # last row and pass the rest on unread (the other consumers' rows reach into them), unless the
    # ping-pong's turns count every block
    n_done = n_blocks
    if CAUSAL and not ONE_MASKED and not PINGPONG:
        n_done = gl.minimum((q_pos + BLOCK_M - 1) // BLOCK_N + 1, n_blocks)
    for j in range(1, n_unmasked):
        o, p, m_i, l_i = _step(j, o, p, m_i, l_i, q_smem, ring, sched, qk_scale, q_pos, False, PINGPONG,
                               s_layout, o_layout)
    if CAUSAL:
        if ONE_MASKED:
            if n_blocks > 1:
                o, p, m_i, l_i = _step(n_blocks - 1, o, p, m_i, l_i, q_smem, ring, sched, qk_scale, q_pos, True,
                                       PINGPONG, s_layout, o_layout)
        else:
            for j in range(n_unmasked, n_done):
                o, p, m_i, l_i = _step(j, o, p, m_i, l_i, q_smem, ring, sched, qk_scale, q_pos, True, PINGPONG,
                                       s_layout, o_layout)

    last = (n_done - 1) % NUM_STAGES
    v_tile = v_smem.index(last)
    mbarrier.wait(v_ready.index(last), ((n_done - 1) // NUM_STAGES) & 1)
    _take_turn(sched, n_done, PINGPONG)
    o = warpgroup_mma(p, v_tile, o, is_async=True)
    _pass_turn(sched, PINGPONG)
    o, p = warpgroup_mma_wait(0, deps=(o, p))
    mbarrier.arrive(v_empty.index(last), count=1)
    for j in range(n_done, n_blocks):
        _pass_block(j, ring)

    if TAIL:
        if q_pos < N:
            _epilogue(o, m_i, l_i, q_smem, o_desc, LSE, q_row, lse_row, o_layout)
    else:
        _epilogue(o, m_i, l_i, q_smem, o_desc, LSE, q_row, lse_row, o_layout)


@gluon.jit
def _pass_block(j, ring):
    """Free key block j's slots unread, once loaded: waiting first keeps this consumer's arrivals in
    the ring's round (an early one would count towards the slot's previous use)."""
    k_smem, v_smem, k_ready, k_empty, v_ready, v_empty = ring
    NUM_STAGES: gl.constexpr = k_smem.shape[0]
    stage = j % NUM_STAGES
    phase = (j // NUM_STAGES) & 1
    mbarrier.wait(k_ready.index(stage), phase)
    mbarrier.arrive(k_empty.index(stage), count=1)
    mbarrier.wait(v_ready.index(stage), phase)
    mbarrier.arrive(v_empty.index(stage), count=1)


@gluon.jit
def _epilogue(o, m_i, l_i, q_smem, o_desc, LSE, q_row, lse_row, o_layout: gl.constexpr):
    """Store lse and O / l of one consumer's rows."""
    BLOCK_M: gl.constexpr = q_smem.shape[0]
    lse = m_i + gl.log2(l_i)
    gl.store(LSE + lse_row + gl.arange(0, BLOCK_M, layout=m_i.type.layout), lse)
    o = o / gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))[:, None]
    # Q is no longer read: its buffer stages O for the TMA store
    q_smem.store(o.to(q_smem.dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [q_row, 0], q_smem)
    tma.store_wait(0)


# ----------------------------------------------------------------------------------------------
# kernel
# ----------------------------------------------------------------------------------------------
@gluon.jit
def attn_fwd_kernel(q_desc, k_desc, v_desc, o_desc, LSE, qk_scale, N, BLOCK_N: gl.constexpr,
                    NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, PINGPONG: gl.constexpr,
                    CONSUMER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr, CONSUMERS: gl.constexpr,
                    TAIL: gl.constexpr, SKIP_IDLE: gl.constexpr):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    ROWS: gl.constexpr = CONSUMERS * BLOCK_M
    # only the last key block crosses the diagonal (ROWS == BLOCK_N, every program whole)
    ONE_MASKED: gl.constexpr = (ROWS == BLOCK_N) and not TAIL
    pid_m = gl.program_id(0)
    off_hz = gl.program_id(1)
    if CAUSAL:
        # the last query blocks have the most keys: start them first (less tail at the end)
        pid_m = gl.num_programs(0) - 1 - pid_m
    q_pos = pid_m * ROWS
    if CAUSAL and SKIP_IDLE:
        # the rows end at N, so the ragged program is the first (the fewest key blocks), not the longest
        q_pos = q_pos - (gl.num_programs(0) * ROWS - N)
    kv_row = off_hz * N
    q_row = kv_row + q_pos
    if CAUSAL:
        if ONE_MASKED:
            n_blocks = (q_pos + ROWS) // BLOCK_N
        else:
            n_blocks = gl.minimum((q_pos + ROWS + BLOCK_N - 1) // BLOCK_N, N // BLOCK_N)
    else:
        n_blocks = N // BLOCK_N

    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [CONSUMERS] + q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES] + v_desc.block_type.shape, v_desc.layout)
    q_bars = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    turns = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(CONSUMERS):
        mbarrier.init(q_bars.index(c), count=1)
        mbarrier.init(turns.index(c), count=1)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=CONSUMERS)  # one arrival per consumer
        mbarrier.init(v_empty.index(i), count=CONSUMERS)

    lse_row = off_hz * N + q_pos
    ring = (k_smem, v_smem, k_ready, k_empty, v_ready, v_empty)
    # constexprs stay out of assigned tuples (an assignment turns them into tensors); the ping-pong
    # turns pass around the consumers as a ring (_take_turn)
    if CONSUMERS == 2:
        gl.warp_specialize([
            (_consumer, (q_smem.index(0), q_bars.index(0), ring, (turns.index(0), turns.index(1), 1), o_desc, LSE,
                         q_row, q_pos, lse_row, n_blocks, qk_scale, N, CAUSAL, PINGPONG, ONE_MASKED, TAIL, SKIP_IDLE)),
            (_consumer, (q_smem.index(1), q_bars.index(1), ring, (turns.index(1), turns.index(0), 0), o_desc, LSE,
                         q_row + BLOCK_M, q_pos + BLOCK_M, lse_row + BLOCK_M, n_blocks, qk_scale, N, CAUSAL,
                         PINGPONG, ONE_MASKED, TAIL, SKIP_IDLE)),
            (_loader, (q_desc, k_desc, v_desc, q_smem, q_bars, ring, q_row, q_pos, N, kv_row, n_blocks, SKIP_IDLE)),
        ], [4, 1], [CONSUMER_REGS, LOADER_REGS])
    else:
        gl.static_assert(CONSUMERS == 3)
        gl.warp_specialize([
            (_consumer, (q_smem.index(0), q_bars.index(0), ring, (turns.index(0), turns.index(1), 1), o_desc, LSE,
                         q_row, q_pos, lse_row, n_blocks, qk_scale, N, CAUSAL, PINGPONG, ONE_MASKED, TAIL, SKIP_IDLE)),
            (_consumer, (q_smem.index(1), q_bars.index(1), ring, (turns.index(1), turns.index(2), 0), o_desc, LSE,
                         q_row + BLOCK_M, q_pos + BLOCK_M, lse_row + BLOCK_M, n_blocks, qk_scale, N, CAUSAL,
                         PINGPONG, ONE_MASKED, TAIL, SKIP_IDLE)),
            (_consumer, (q_smem.index(2), q_bars.index(2), ring, (turns.index(2), turns.index(0), 0), o_desc, LSE,
                         q_row + 2 * BLOCK_M, q_pos + 2 * BLOCK_M, lse_row + 2 * BLOCK_M, n_blocks, qk_scale, N,
                         CAUSAL, PINGPONG, ONE_MASKED, TAIL, SKIP_IDLE)),
            (_loader, (q_desc, k_desc, v_desc, q_smem, q_bars, ring, q_row, q_pos, N, kv_row, n_blocks, SKIP_IDLE)),
        ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, LOADER_REGS])

    for c in gl.static_range(CONSUMERS):
        mbarrier.invalidate(q_bars.index(c))
        mbarrier.invalidate(turns.index(c))
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(k_ready.index(i))
        mbarrier.invalidate(v_ready.index(i))
        mbarrier.invalidate(k_empty.index(i))
        mbarrier.invalidate(v_empty.index(i))


# ----------------------------------------------------------------------------------------------
# host
# ----------------------------------------------------------------------------------------------
def supported(q: torch.Tensor, causal: bool = False) -> bool:
    """Whether ``forward`` takes this case with its own tiles (``tiles_for``); the rest is the
    Triton kernel's. Of q only: k and v are the caller's to match (kernels.flash_attention)."""
    if q.device.type != "cuda" or q.dim() != 4 or not q.is_contiguous():
        return False
    B, H, N, D = q.shape
    if D not in CONFIGS or q.dtype not in DTYPES or (D == 64 and SHORT_D64_FROM_N <= N < SHORT_D64_BELOW_N):
        return False
    tiles = tiles_for(D, causal, N)
    return (torch.cuda.get_device_capability(q.device) == (9, 0) and tiles.takes(N)
            and tiles.problem(D, q.element_size()) is None)


def descriptors(q, k, v, o, head_dim: int, tiles: Tiles | None = None):
    """TMA descriptors of q, k, v, o seen as (B*H*N, D) matrices: Q/O tiles of block_m rows, K/V of
    block_n."""
    tiles = tiles or default_tiles(head_dim)
    dtype = DTYPES[q.dtype]

    def desc(t, rows):
        layout = gl.NVMMASharedLayout.get_default_for([rows, head_dim], dtype)
        return TensorDescriptor.from_tensor(t.view(-1, head_dim), [rows, head_dim], layout)

    return desc(q, tiles.block_m), desc(k, tiles.block_n), desc(v, tiles.block_n), desc(o, tiles.block_m)


def _options(tiles: Tiles) -> dict:
    """The launch options besides the constexprs."""
    return dict(num_warps=4, **({"maxnreg": tiles.launch_regs} if tiles.launch_regs else {}))


def _constexprs(tiles: Tiles, causal: bool, n: int) -> dict:
    """The kernel's compile-time arguments at sequence length ``n``."""
    tail = n % tiles.rows != 0
    return dict(BLOCK_N=tiles.block_n, NUM_STAGES=tiles.stages, CAUSAL=bool(causal), PINGPONG=bool(tiles.pingpong),
                CONSUMER_REGS=tiles.consumer_regs, LOADER_REGS=tiles.loader_regs, CONSUMERS=tiles.consumers,
                TAIL=tail,
                # ping-pong's turns count every block of every consumer: its idle consumers compute
                SKIP_IDLE=tail and tiles.skip_idle and not tiles.pingpong)


def forward(q, k, v, causal: bool, sm_scale: float | None = None, pingpong: bool | None = None,
            tiles: Tiles | None = None):
    """(o, lse) for contiguous q, k, v of shape (B, H, N, D) where ``supported``: lse float32
    (B, H, N) in base 2, as the Triton forward's. ``pingpong`` (default ``PINGPONG``): alternate the
    consumers' MMAs. ``tiles`` (default ``tiles_for(D, causal, N)``, with ``pingpong`` if given): another
    launch configuration, for sweeps; a ValueError when it cannot run this case (or ``sm_scale`` is
    not positive: the softmax folds it into the exponent's FMA, after the mask)."""
    B, H, N, D = q.shape
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    if not sm_scale > 0:
        raise ValueError(f"flash_attention_gluon.forward: sm_scale {sm_scale} is not positive")
    tiles = tiles or tiles_for(D, causal, N)
    if pingpong is not None:
        tiles = dataclasses.replace(tiles, pingpong=bool(pingpong))
    problem = tiles.problem(D, q.element_size()) or (None if tiles.takes(N) else
                                                      f"N {N} not a multiple of block_n and block_m")
    if problem:
        raise ValueError(f"flash_attention_gluon.forward: {tiles}: {problem}")
    o = torch.empty_like(q)
    lse = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(N, tiles.rows), B * H)
    attn_fwd_kernel[grid](*descriptors(q, k, v, o, D, tiles), lse, sm_scale * LOG2E, N,
                          **_constexprs(tiles, causal, N), **_options(tiles))
    return o, lse


def compile_only(head_dim: int, causal: bool, dtype: torch.dtype = torch.bfloat16, pingpong: bool = PINGPONG,
                 arch: int = 90, tiles: Tiles | None = None):
    """Compile the kernel for sm_``arch`` without a GPU (a CPU tensor stands in for the data):
    Triton's CompiledKernel, whose ``asm`` holds the ttgir, ptx and cubin. ``tiles`` as ``forward``'s
    (their ping-pong wins over ``pingpong``); a sequence that is not a multiple of their rows compiles
    the TAIL variant."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import mangle_type

    tiles = tiles or dataclasses.replace(default_tiles(head_dim), pingpong=bool(pingpong))
    n = 4 * math.lcm(ROWS_PER_PROGRAM, tiles.block_n, tiles.block_m)
    q = torch.empty((1, 1, n, head_dim), dtype=dtype)
    descs = descriptors(q, q, q, q, head_dim, tiles)
    names = ["q_desc", "k_desc", "v_desc", "o_desc", "LSE", "qk_scale", "N"]
    signature = {name: mangle_type(d) for name, d in zip(names, descs)}
    signature.update(LSE="*fp32", qk_scale="fp32", N="i32")
    # N is a runtime argument: TAIL is compiled in where the tiles' rows do not divide every N
    constexprs = _constexprs(tiles, causal, n if n % tiles.rows == 0 else n + tiles.block_m)
    signature.update({name: "constexpr" for name in constexprs})
    src = GluonASTSource(attn_fwd_kernel, signature, constexprs=constexprs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=_options(tiles))
