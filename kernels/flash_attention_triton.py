"""Triton kernels for FlashAttention: forward, the backward's delta preprocess, and the backward.

All tensors are contiguous (B, H, N, D); a program works on one (batch, head) slice, whose rows
start at ``(b * H + h) * N * D``. The log-sum-exp is kept in base 2 (``m + log2(l)`` on scores
already multiplied by ``sm_scale * log2(e)``), so the backward recomputes P with one exp2.

Two ways to move tiles, chosen by the caller (``USE_TMA``), both in these same kernels:
- ``USE_TMA=True``: per-head tensor descriptors made on the device (``tl.make_tensor_descriptor``,
  shape (N, D)); on Hopper they are TMA copies, pipelined by the compiler, and rows past N come
  back as zeros and stores past N are clipped by the hardware. Needs ``triton.set_allocator``.
- ``USE_TMA=False``: plain pointer loads/stores masked with ``row < N`` (zeros past N): any GPU
  and the CPU interpreter.

The backward's dK/dV loop takes its per-query lse and delta rows by 1-D descriptors too where the
caller says so (``ROWS_TMA``: needs ``USE_TMA`` and 16-byte aligned rows, N % 4 == 0), else by
masked pointer loads.

Sequence-length tails need no masks in the backward: padded Q/dO rows are zero and their LSE is
loaded as +inf by pointer (P = 0) or as 0 by descriptor (P = 1, but against zero dO and Q rows, so
dV, dP and dK get nothing from them), padded K/V rows are zero (P.V and dS.K get nothing from
them), and outputs past N are never stored. The forward masks the last key block (scores -inf),
because padded keys would otherwise enter the softmax denominator.
"""
from __future__ import annotations

import triton
import triton.language as tl

# dot: plain tl.dot in compiled code; under the interpreter, which gets bf16 products wrong, its
# operands are widened to float32 (exact: P and dS are still rounded to the input dtype first).
from kernels.triton_compat import dot


@triton.jit
def _load_rows(base, desc, row0, N, BLOCK: tl.constexpr, HEAD_DIM: tl.constexpr, USE_TMA: tl.constexpr):
    """A (BLOCK, HEAD_DIM) tile starting at row ``row0`` of one head; rows >= N read as 0."""
    if USE_TMA:
        tile = desc.load([row0, 0])
    else:
        rows = row0 + tl.arange(0, BLOCK)
        cols = tl.arange(0, HEAD_DIM)
        tile = tl.load(base + rows[:, None] * HEAD_DIM + cols[None, :], mask=rows[:, None] < N, other=0.0)
    return tile


@triton.jit
def _store_rows(base, desc, row0, N, tile, BLOCK: tl.constexpr, HEAD_DIM: tl.constexpr, USE_TMA: tl.constexpr):
    """Store a (BLOCK, HEAD_DIM) tile at row ``row0``; rows >= N are not written."""
    if USE_TMA:
        desc.store([row0, 0], tile)
    else:
        rows = row0 + tl.arange(0, BLOCK)
        cols = tl.arange(0, HEAD_DIM)
        tl.store(base + rows[:, None] * HEAD_DIM + cols[None, :], tile, mask=rows[:, None] < N)


@triton.jit
def _make_desc(base, N, BLOCK: tl.constexpr, HEAD_DIM: tl.constexpr, USE_TMA: tl.constexpr):
    if USE_TMA:
        desc = tl.make_tensor_descriptor(base, shape=[N, HEAD_DIM], strides=[HEAD_DIM, 1],
                                         block_shape=[BLOCK, HEAD_DIM])
    else:
        desc = None
    return desc


@triton.jit
def _make_row_desc(base, N, BLOCK: tl.constexpr, USE_TMA: tl.constexpr):
    """A 1-D descriptor over one head's N per-row floats (lse, delta), or None."""
    if USE_TMA:
        desc = tl.make_tensor_descriptor(base, shape=[N], strides=[1], block_shape=[BLOCK])
    else:
        desc = None
    return desc


@triton.jit
def _load_row_values(base, desc, row0, N, other, BLOCK: tl.constexpr, USE_TMA: tl.constexpr):
    """BLOCK per-row floats from row ``row0``; rows >= N read as ``other`` (by descriptor: 0)."""
    if USE_TMA:
        values = desc.load([row0])
    else:
        rows = row0 + tl.arange(0, BLOCK)
        values = tl.load(base + rows, mask=rows < N, other=other)
    return values


# ----------------------------------------------------------------------------------------------
# forward
# ----------------------------------------------------------------------------------------------
@triton.jit
def _fwd_inner(acc, l_i, m_i, q, K, V, desc_k, desc_v, lo, hi, offs_m, qk_scale, N,
               BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
               MASK: tl.constexpr,  # 0: none, 1: causal (key <= query), 2: key < N
               USE_TMA: tl.constexpr):
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = _load_rows(K, desc_k, start_n, N, BLOCK_N, HEAD_DIM, USE_TMA)
        qk = dot(q, tl.trans(k))
        if MASK == 0:
            # scale folded into the exponent: one FMA per score
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        else:
            offs_n = start_n + offs_n0
            if MASK == 1:
                keep = offs_m[:, None] >= offs_n[None, :]
            else:
                keep = offs_n[None, :] < N
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1))  # finite: every row keeps key 0 or an earlier max
            qk = qk - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = _load_rows(V, desc_v, start_n, N, BLOCK_N, HEAD_DIM, USE_TMA)
        acc = dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def attn_fwd_kernel(Q, K, V, O, LSE, qk_scale, N,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    CAUSAL: tl.constexpr, USE_TMA: tl.constexpr):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    pid_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    if CAUSAL:
        # the last query blocks have the most keys: start them first (less tail at the end)
        pid_m = tl.num_programs(0) - 1 - pid_m
    start_m = pid_m * BLOCK_M
    head = off_hz.to(tl.int64) * N * HEAD_DIM
    Q += head
    K += head
    V += head
    O += head
    desc_q = _make_desc(Q, N, BLOCK_M, HEAD_DIM, USE_TMA)
    desc_k = _make_desc(K, N, BLOCK_N, HEAD_DIM, USE_TMA)
    desc_v = _make_desc(V, N, BLOCK_N, HEAD_DIM, USE_TMA)
    desc_o = _make_desc(O, N, BLOCK_M, HEAD_DIM, USE_TMA)

    offs_m = start_m + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    q = _load_rows(Q, desc_q, start_m, N, BLOCK_M, HEAD_DIM, USE_TMA)

    if CAUSAL:
        # keys left of the diagonal block: no mask; then the diagonal block, masked
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, K, V, desc_k, desc_v, 0, start_m, offs_m, qk_scale, N,
                                   BLOCK_N, HEAD_DIM, 0, USE_TMA)
        hi = tl.minimum(start_m + BLOCK_M, N)
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, K, V, desc_k, desc_v, start_m, hi, offs_m, qk_scale, N,
                                   BLOCK_N, HEAD_DIM, 1, USE_TMA)
    else:
        n_full = (N // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, K, V, desc_k, desc_v, 0, n_full, offs_m, qk_scale, N,
                                   BLOCK_N, HEAD_DIM, 0, USE_TMA)
        if n_full < N:
            acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, K, V, desc_k, desc_v, n_full, N, offs_m, qk_scale, N,
                                       BLOCK_N, HEAD_DIM, 2, USE_TMA)

    acc = acc / l_i[:, None]
    tl.store(LSE + off_hz.to(tl.int64) * N + offs_m, m_i + tl.math.log2(l_i), mask=offs_m < N)
    _store_rows(O, desc_o, start_m, N, acc.to(O.dtype.element_ty), BLOCK_M, HEAD_DIM, USE_TMA)


# ----------------------------------------------------------------------------------------------
# backward
# ----------------------------------------------------------------------------------------------
@triton.jit
def attn_bwd_delta_kernel(O, DO, DELTA, N, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta[row] = sum_d O[row, d] * dO[row, d] (float32), the softmax-backward row term."""
    off_hz = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_DIM)
    offs = off_hz.to(tl.int64) * N * HEAD_DIM + rows[:, None] * HEAD_DIM + cols[None, :]
    mask = rows[:, None] < N
    o = tl.load(O + offs, mask=mask, other=0.0).to(tl.float32)
    do = tl.load(DO + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(DELTA + off_hz.to(tl.int64) * N + rows, tl.sum(o * do, 1), mask=rows < N)


@triton.jit
def _bwd_dkdv_inner(dk, dv, k, v, Q, DO, desc_q, desc_do, LSE, DELTA, desc_lse, desc_delta, lo, hi, offs_n,
                    qk_scale, N, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, MASK: tl.constexpr,
                    USE_TMA: tl.constexpr, ROWS_TMA: tl.constexpr):
    """dK, dV of one key block, over query blocks [lo, hi): all in transposed (key-major) form."""
    for start_m in tl.range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = _load_rows(Q, desc_q, start_m, N, BLOCK_M, HEAD_DIM, USE_TMA)
        lse = _load_row_values(LSE, desc_lse, start_m, N, float("inf"), BLOCK_M, ROWS_TMA)  # tails: module doc
        qkT = dot(k, tl.trans(q))
        pT = tl.math.exp2(qkT * qk_scale - lse[None, :])
        if MASK:
            pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
        do = _load_rows(DO, desc_do, start_m, N, BLOCK_M, HEAD_DIM, USE_TMA)
        dv = dot(pT.to(do.dtype), do, dv)
        delta = _load_row_values(DELTA, desc_delta, start_m, N, 0.0, BLOCK_M, ROWS_TMA)
        dpT = dot(v, tl.trans(do))
        dsT = pT * (dpT - delta[None, :])
        dk = dot(dsT.to(q.dtype), q, dk)
    return dk, dv


@triton.jit
def _bwd_dq_inner(dq, q, do, lse, delta, K, V, desc_k, desc_v, lo, hi, offs_m, qk_scale, N,
                  BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASK: tl.constexpr, USE_TMA: tl.constexpr):
    """dQ of one query block, over key blocks [lo, hi)."""
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = _load_rows(K, desc_k, start_n, N, BLOCK_N, HEAD_DIM, USE_TMA)
        qk = dot(q, tl.trans(k))
        p = tl.math.exp2(qk * qk_scale - lse[:, None])
        if MASK:
            offs_n = start_n + tl.arange(0, BLOCK_N)
            p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        v = _load_rows(V, desc_v, start_n, N, BLOCK_N, HEAD_DIM, USE_TMA)
        dp = dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq = dot(ds.to(k.dtype), k, dq)
    return dq


@triton.jit
def _bwd_dkdv_program(Q, K, V, DO, DK, DV, LSE, DELTA, start_n, qk_scale, sm_scale, N,
                      HEAD_DIM: tl.constexpr, BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr,
                      CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, ROWS_TMA: tl.constexpr):
    """dK, dV for keys [start_n, start_n + BLOCK_N1) of one head."""
    offs_n = start_n + tl.arange(0, BLOCK_N1)
    desc_k = _make_desc(K, N, BLOCK_N1, HEAD_DIM, USE_TMA)
    desc_v = _make_desc(V, N, BLOCK_N1, HEAD_DIM, USE_TMA)
    desc_q = _make_desc(Q, N, BLOCK_M1, HEAD_DIM, USE_TMA)
    desc_do = _make_desc(DO, N, BLOCK_M1, HEAD_DIM, USE_TMA)
    desc_lse = _make_row_desc(LSE, N, BLOCK_M1, ROWS_TMA)
    desc_delta = _make_row_desc(DELTA, N, BLOCK_M1, ROWS_TMA)
    k = _load_rows(K, desc_k, start_n, N, BLOCK_N1, HEAD_DIM, USE_TMA)
    v = _load_rows(V, desc_v, start_n, N, BLOCK_N1, HEAD_DIM, USE_TMA)
    dk = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # queries in the diagonal block see part of these keys (masked); later queries see all
        diag_hi = tl.minimum(start_n + BLOCK_N1, N)
        dk, dv = _bwd_dkdv_inner(dk, dv, k, v, Q, DO, desc_q, desc_do, LSE, DELTA, desc_lse, desc_delta,
                                 start_n, diag_hi, offs_n, qk_scale, N, BLOCK_M1, HEAD_DIM, True, USE_TMA, ROWS_TMA)
        dk, dv = _bwd_dkdv_inner(dk, dv, k, v, Q, DO, desc_q, desc_do, LSE, DELTA, desc_lse, desc_delta,
                                 start_n + BLOCK_N1, N, offs_n, qk_scale, N, BLOCK_M1, HEAD_DIM, False, USE_TMA,
                                 ROWS_TMA)
    else:
        dk, dv = _bwd_dkdv_inner(dk, dv, k, v, Q, DO, desc_q, desc_do, LSE, DELTA, desc_lse, desc_delta,
                                 0, N, offs_n, qk_scale, N, BLOCK_M1, HEAD_DIM, False, USE_TMA, ROWS_TMA)
    dk = dk * sm_scale
    _store_rows(DV, _make_desc(DV, N, BLOCK_N1, HEAD_DIM, USE_TMA), start_n, N,
                dv.to(DV.dtype.element_ty), BLOCK_N1, HEAD_DIM, USE_TMA)
    _store_rows(DK, _make_desc(DK, N, BLOCK_N1, HEAD_DIM, USE_TMA), start_n, N,
                dk.to(DK.dtype.element_ty), BLOCK_N1, HEAD_DIM, USE_TMA)


@triton.jit
def _bwd_dq_program(Q, K, V, DO, DQ, LSE, DELTA, start_m, qk_scale, sm_scale, N,
                    HEAD_DIM: tl.constexpr, BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr,
                    CAUSAL: tl.constexpr, USE_TMA: tl.constexpr):
    """dQ for queries [start_m, start_m + BLOCK_M2) of one head."""
    offs_m = start_m + tl.arange(0, BLOCK_M2)
    desc_q = _make_desc(Q, N, BLOCK_M2, HEAD_DIM, USE_TMA)
    desc_do = _make_desc(DO, N, BLOCK_M2, HEAD_DIM, USE_TMA)
    desc_k = _make_desc(K, N, BLOCK_N2, HEAD_DIM, USE_TMA)
    desc_v = _make_desc(V, N, BLOCK_N2, HEAD_DIM, USE_TMA)
    q = _load_rows(Q, desc_q, start_m, N, BLOCK_M2, HEAD_DIM, USE_TMA)
    do = _load_rows(DO, desc_do, start_m, N, BLOCK_M2, HEAD_DIM, USE_TMA)
    lse = _load_row_values(LSE, None, start_m, N, float("inf"), BLOCK_M2, False)
    delta = _load_row_values(DELTA, None, start_m, N, 0.0, BLOCK_M2, False)
    dq = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # keys of the diagonal block (masked), then all earlier keys (no mask)
        diag_hi = tl.minimum(start_m + BLOCK_M2, N)
        dq = _bwd_dq_inner(dq, q, do, lse, delta, K, V, desc_k, desc_v, start_m, diag_hi, offs_m,
                           qk_scale, N, BLOCK_N2, HEAD_DIM, True, USE_TMA)
        dq = _bwd_dq_inner(dq, q, do, lse, delta, K, V, desc_k, desc_v, 0, start_m, offs_m,
                           qk_scale, N, BLOCK_N2, HEAD_DIM, False, USE_TMA)
    else:
        dq = _bwd_dq_inner(dq, q, do, lse, delta, K, V, desc_k, desc_v, 0, N, offs_m,
                           qk_scale, N, BLOCK_N2, HEAD_DIM, False, USE_TMA)
    dq = dq * sm_scale
    _store_rows(DQ, _make_desc(DQ, N, BLOCK_M2, HEAD_DIM, USE_TMA), start_m, N,
                dq.to(DQ.dtype.element_ty), BLOCK_M2, HEAD_DIM, USE_TMA)


@triton.jit
def attn_bwd_kernel(Q, K, V, DO, DQ, DK, DV, LSE, DELTA, qk_scale, sm_scale, N,
                    HEAD_DIM: tl.constexpr, BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr,
                    BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr,
                    CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, MODE: tl.constexpr,
                    ROWS_TMA: tl.constexpr):
    """MODE 0, one launch with two kinds of program per head: the first cdiv(N, BLOCK_N1) compute
    dK, dV of a key block (loop over query blocks), the rest dQ of a query block (loop over key
    blocks). MODE 1: only the dK/dV programs; MODE 2: only the dQ programs (two launches, each
    compiled with its own launch parameters). No atomics; S and P are recomputed by both kinds. Causal: both
    kinds start with their heaviest blocks (key block 0, the last query block)."""
    tl.static_assert(BLOCK_N1 % BLOCK_M1 == 0)
    tl.static_assert(BLOCK_M2 % BLOCK_N2 == 0)
    pid = tl.program_id(0)
    off_hz = tl.program_id(1)
    head = off_hz.to(tl.int64) * N * HEAD_DIM
    LSE += off_hz.to(tl.int64) * N
    DELTA += off_hz.to(tl.int64) * N
    if MODE == 1:
        _bwd_dkdv_program(Q + head, K + head, V + head, DO + head, DK + head, DV + head, LSE, DELTA,
                          pid * BLOCK_N1, qk_scale, sm_scale, N, HEAD_DIM, BLOCK_M1, BLOCK_N1, CAUSAL, USE_TMA,
                          ROWS_TMA)
    elif MODE == 2:
        pid_m = tl.num_programs(0) - 1 - pid
        _bwd_dq_program(Q + head, K + head, V + head, DO + head, DQ + head, LSE, DELTA,
                        pid_m * BLOCK_M2, qk_scale, sm_scale, N, HEAD_DIM, BLOCK_M2, BLOCK_N2, CAUSAL, USE_TMA)
    else:
        num_n_blocks = tl.cdiv(N, BLOCK_N1)
        if pid < num_n_blocks:
            _bwd_dkdv_program(Q + head, K + head, V + head, DO + head, DK + head, DV + head, LSE, DELTA,
                              pid * BLOCK_N1, qk_scale, sm_scale, N, HEAD_DIM, BLOCK_M1, BLOCK_N1, CAUSAL,
                              USE_TMA, ROWS_TMA)
        else:
            pid_m = tl.cdiv(N, BLOCK_M2) - 1 - (pid - num_n_blocks)
            _bwd_dq_program(Q + head, K + head, V + head, DO + head, DQ + head, LSE, DELTA,
                            pid_m * BLOCK_M2, qk_scale, sm_scale, N, HEAD_DIM, BLOCK_M2, BLOCK_N2, CAUSAL,
                            USE_TMA)
