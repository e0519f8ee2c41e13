"""Scaled dot-product attention, forward and backward: a FlashAttention in Triton and its peers.

Inputs are q, k, v of shape (B, H, N, D) (batch, heads, sequence length, head dim), the same N
for queries and keys; ``causal`` lets query i see keys 0..i. The softmax scale is 1/sqrt(D).
``shape`` below is the tuple (B, H, N, D).

Cost model (``cost``): flops 4*B*H*N^2*D forward (two matmuls per head), 2.5x that backward
(S recomputed, dV, dP, dQ, dK), halved when causal; bytes the minimum traffic (forward q, k, v, o;
backward q, k, v, o, dO, the float32 log-sum-exp, dQ, dK, dV). Work an implementation repeats and
its own temporaries are not counted.

Implementations (``IMPLS``): ``triton`` (FlashAttention-2 style, ``flash_attention_triton.py``; on
sm_90 its forward and backward are the warp-specialized Gluon kernels of ``flash_attention_gluon.py`` and
``flash_attention_gluon_bwd.py`` where those take the case),
``torch_manual`` (materializes scores), SDPA with one backend forced (``torch_flash``,
``torch_cudnn``, ``torch_efficient``), ``compiled`` (``torch_manual`` compiled) and ``flex``.
``unavailable_reason`` says, before a call, why an impl cannot run a case here.
"""
from __future__ import annotations

import functools
import importlib
import math
import os
from typing import Callable

import torch
import torch.nn.functional as F

from kernels import common

LOG2E = 1.4426950408889634

# ----------------------------------------------------------------------------------------------
# tolerances
# ----------------------------------------------------------------------------------------------
# An element's error is a few roundings (2^-8 bf16, 2^-11 fp16) of the typical magnitude of the
# output, not of the element (many sit near zero): atol = atol_rms * rms(reference), plus a
# relative part. The measured needs behind these values: docs/kernels/flash_attention.md.
TOLERANCE = {
    torch.bfloat16: {"rtol": 2e-2, "atol_rms": 0.25},
    torch.float16: {"rtol": 4e-3, "atol_rms": 0.04},
    torch.float32: {"rtol": 1e-4, "atol_rms": 1e-4},
}


def tolerance(expected: torch.Tensor, dtype: torch.dtype) -> dict[str, float]:
    """rtol/atol for comparing an impl's output of ``dtype`` with the float64 ``expected``."""
    tol = TOLERANCE[dtype]
    rms = expected.double().pow(2).mean().sqrt().item()
    return {"rtol": tol["rtol"], "atol": tol["atol_rms"] * max(rms, 1e-6)}


# ----------------------------------------------------------------------------------------------
# inputs, reference, cost
# ----------------------------------------------------------------------------------------------
def make_inputs(shape, dtype, device, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v of ``shape`` (B, H, N, D), standard normal, contiguous."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return tuple(torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)
                 for _ in range(3))


def make_grad_output(shape, dtype, device, seed: int = 0) -> torch.Tensor:
    """dO for the backward, standard normal (a different stream from the inputs)."""
    gen = torch.Generator(device=device).manual_seed(seed + 1_000_003)
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)


def _ref_chunks(N: int) -> int:
    """Query rows per chunk of the float64 reference: about 32 MiB of float64 scores at a time."""
    return max(1, min(N, (4 << 20) // max(N, 1)))


def reference_grads(q, k, v, dout=None, causal: bool = False, sm_scale: float | None = None):
    """Float64 attention on the inputs' device: out, and with ``dout`` also (dq, dk, dv).

    Exact formulas, one head and a slab of query rows at a time, so that memory stays bounded at
    any N: S = scale*Q K^T (masked), P = softmax(S), O = P V; dV = P^T dO, dP = dO V^T,
    dS = P * (dP - rowsum(dO * O)), dQ = scale * dS K, dK = scale * dS^T Q.
    """
    B, H, N, D = q.shape
    scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    q64, k64, v64 = (t.detach().to(torch.float64) for t in (q, k, v))
    out = torch.empty_like(q64)
    grads = dout is not None
    if grads:
        do64 = dout.detach().to(torch.float64)
        dq, dk, dv = torch.empty_like(q64), torch.zeros_like(k64), torch.zeros_like(v64)
    rows_per = _ref_chunks(N)
    cols = torch.arange(N, device=q.device)
    for b in range(B):
        for h in range(H):
            qh, kh, vh = q64[b, h], k64[b, h], v64[b, h]
            for r0 in range(0, N, rows_per):
                r1 = min(N, r0 + rows_per)
                s = (qh[r0:r1] @ kh.T) * scale
                if causal:
                    rows = torch.arange(r0, r1, device=q.device)
                    s.masked_fill_(cols[None, :] > rows[:, None], float("-inf"))
                p = torch.softmax(s, dim=-1)
                o = p @ vh
                out[b, h, r0:r1] = o
                if grads:
                    do = do64[b, h, r0:r1]
                    dv[b, h] += p.T @ do
                    dp = do @ vh.T
                    ds = p * (dp - (do * o).sum(-1, keepdim=True))
                    dq[b, h, r0:r1] = scale * (ds @ kh)
                    dk[b, h] += scale * (ds.T @ qh[r0:r1])
    return (out, dq, dk, dv) if grads else out


def reference(q, k, v, causal: bool = False, sm_scale: float | None = None) -> torch.Tensor:
    """softmax(scale * q k^T [causal mask]) v in float64, on the inputs' device."""
    return reference_grads(q, k, v, None, causal, sm_scale)


def cost(shape, dtype, causal: bool = False, backward: bool = False) -> tuple[int, int]:
    """(bytes, flops) of one forward, or of one backward; see the module docstring."""
    B, H, N, D = shape
    elem = torch.empty((), dtype=dtype).element_size()
    flops = 4 * B * H * N * N * D
    if causal:
        flops //= 2
    if backward:
        return 8 * B * H * N * D * elem + 4 * B * H * N, int(flops * 2.5)
    return 4 * B * H * N * D * elem, flops


# ----------------------------------------------------------------------------------------------
# triton
# ----------------------------------------------------------------------------------------------
# The rule of kernels.triton_compat.INTERPRET, read here so that importing this module does not
# import Triton; flash_attention_triton imports triton_compat (the interpreter's NumPy >= 2.4 fix
# and the widened dot) before any kernel runs.
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
SUPPORTED_HEAD_DIMS = (16, 32, 64, 128)  # launch tables: FWD_CONFIGS, BWD_CONFIGS


def _device_supports_tma(device: torch.device) -> bool:
    """Tensor descriptors backed by TMA: CUDA devices of compute capability 9.0 and newer."""
    return device.type == "cuda" and not INTERPRET and torch.cuda.get_device_capability(device)[0] >= 9


def _tma_layout_ok(*tensors: torch.Tensor) -> bool:
    """TMA needs 16-byte aligned bases (rows are D elements, D*elem is a multiple of 16 here)."""
    return all(t.data_ptr() % 16 == 0 for t in tensors)


def _ensure_triton_allocator() -> None:
    """Device-side tensor descriptors need a scratch allocator; give Triton torch's, once."""
    import triton
    from triton.runtime import _allocation

    current = getattr(_allocation, "_allocator", None)
    null = getattr(_allocation, "NullAllocator", None)
    if current is not None and null is not None and not isinstance(current.get(), null):
        return  # someone (the matmul module, the user) already set one

    def alloc(size: int, alignment: int, stream):
        return torch.empty(size, device="cuda", dtype=torch.int8)

    triton.set_allocator(alloc)


# Launch parameters, fixed per head dim (and, forward, per masking) rather than autotuned at run
# time: the autotuner's pick varied between processes and made false alarms. Sweeps and rejected
# variants: docs/kernels/flash_attention.md. Guarded by perf_tests/test_attention.py's config tests.
FWD_CONFIGS = {  # head dim -> (full, causal): BLOCK_M, BLOCK_N, num_warps, num_stages
    64: ((128, 64, 8, 3), (64, 64, 4, 3)),
    128: ((256, 64, 8, 3), (64, 64, 4, 3)),
}
#: D128 full forward where 256-row blocks would leave SMs idle and 128-row ones would not.
FWD_NARROW = (128, 128, 8, 3)
BWD_CONFIGS = {  # head dim -> "split": BLOCK_M1, BLOCK_N1, BLOCK_M2, BLOCK_N2, num_warps, num_stages
    64: (64, 64, 64, 64, 4, 3),
    128: (64, 128, 128, 64, 8, 3),
}
#: Long-sequence backward, per head dim (full, causal): tiles by TMA descriptors (True) or plain
#: loads, whichever measured faster (docs/kernels/flash_attention.md).
BWD_TMA = {64: (True, True), 128: (True, False)}
#: From this N (and N % 4 == 0) the dK/dV loop takes lse and delta rows by 1-D descriptors (one
#: barrier less per iteration); shorter loops run slower with them.
ROWS_TMA_FROM_N = 512
DKDV_CONFIG = (64, 128, 8, 3)  # "two", dK/dV launch: BLOCK_M1, BLOCK_N1, num_warps, num_stages
DQ_CONFIG = (128, 32, 8, 3)  # "two", dQ launch: BLOCK_M2, BLOCK_N2, num_warps, num_stages
BWD_VARIANTS = ("split", "two")
BWD_VARIANT = "split"
# The interpreter's small blocks make tests at N=77/128 cross several blocks, a causal band and a
# partial last block.
INTERPRET_FWD = dict(BLOCK_M=32, BLOCK_N=16)
INTERPRET_BWD = dict(BLOCK_M1=16, BLOCK_N1=32, BLOCK_M2=32, BLOCK_N2=16)
#: Shorter sequences take 64x64 blocks throughout (a 128-row block would be mostly padding).
LONG_BLOCKS_FROM_N = 128
SHORT_FWD = (64, 64, 4, 3)
SHORT_BWD = (64, 64, 64, 64, 4, 3)
# A grid of fewer 128-row programs than SMs (small_grid) takes smaller blocks: the forward always,
# the backward only when causal, where they measured faster.
SMALL_GRID_FWD = SHORT_FWD
SMALL_GRID_BWD = (32, 64, 64, 32, 4, 3)
FWD_FIELDS = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")
BWD_FIELDS = ("BLOCK_M1", "BLOCK_N1", "BLOCK_M2", "BLOCK_N2", "num_warps", "num_stages")


def _table_dim(head_dim: int) -> int:
    return 64 if head_dim <= 64 else 128


def small_grid(batch_heads: int, n: int, sms: int, rows: int = 128) -> bool:
    """True when `rows`-row blocks of B*H = `batch_heads` sequences of length n are fewer than `sms`."""
    return batch_heads * -(-n // rows) < sms


def fwd_config(n: int, head_dim: int, causal: bool, batch_heads: int | None = None, sms: int | None = None) -> dict:
    """Launch parameters of the forward for B*H = `batch_heads` sequences of length n on `sms` SMs
    (either None: a grid that fills the GPU with any blocks; see small_grid)."""
    def small(rows: int) -> bool:
        return batch_heads is not None and sms is not None and small_grid(batch_heads, n, sms, rows)

    if n < LONG_BLOCKS_FROM_N:
        values = SHORT_FWD
    elif small(128):
        values = SMALL_GRID_FWD
    else:
        values = FWD_CONFIGS[_table_dim(head_dim)][int(causal)]
        values = FWD_NARROW if small(values[0]) else values
    return dict(zip(FWD_FIELDS, values))


def bwd_config(n: int, head_dim: int, variant: str, small: bool = False) -> dict:
    """Launch parameters of the backward ("split": one dict; "two": {"dkdv": ..., "dq": ...}; the
    "two" entries are the D128 sweep's, for every head dim; `small`: a causal small grid, see
    small_grid; "split" only)."""
    if variant not in BWD_VARIANTS:
        raise ValueError(f"unknown backward variant {variant!r} (one of {BWD_VARIANTS})")
    if variant == "split" or n < LONG_BLOCKS_FROM_N:
        if n < LONG_BLOCKS_FROM_N:
            values = SHORT_BWD
        else:
            values = SMALL_GRID_BWD if small else BWD_CONFIGS[_table_dim(head_dim)]
        split = dict(zip(BWD_FIELDS, values))
        return split if variant == "split" else {"dkdv": split, "dq": split}
    (m1, n1, w1, s1), (m2, n2, w2, s2) = DKDV_CONFIG, DQ_CONFIG
    return {"dkdv": dict(BLOCK_M1=m1, BLOCK_N1=n1, BLOCK_M2=64, BLOCK_N2=64, num_warps=w1, num_stages=s1),
            "dq": dict(BLOCK_M1=64, BLOCK_N1=64, BLOCK_M2=m2, BLOCK_N2=n2, num_warps=w2, num_stages=s2)}


def bwd_tma(n: int, head_dim: int, causal: bool, small: bool = False) -> bool:
    """Whether the backward takes tensor descriptors where the device has TMA (see BWD_TMA)."""
    return n < LONG_BLOCKS_FROM_N or small or BWD_TMA[_table_dim(head_dim)][int(causal)]


def _check_inputs(q, k, v):
    if not (q.shape == k.shape == v.shape) or q.dim() != 4:
        raise ValueError(f"q, k, v must share one (B, H, N, D) shape, got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head dim {q.shape[-1]} not supported (one of {SUPPORTED_HEAD_DIMS})")
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"q, k, v must all be float16 or bfloat16, got {q.dtype}, {k.dtype}, {v.dtype}")


#: the Hopper Gluon kernels' modules (kernels/), forward and backward
GLUON_FORWARD, GLUON_BACKWARD = "flash_attention_gluon", "flash_attention_gluon_bwd"


@functools.cache
def _gluon_module(name: str):
    """A Gluon kernel's module, or None where this Triton has no Gluon Hopper API (before 3.6)."""
    try:
        return importlib.import_module(f"kernels.{name}")
    except (ImportError, AttributeError, TypeError):
        return None


def gluon_kernel(name: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, *others: torch.Tensor):
    """The Hopper Gluon kernel module ``name`` (GLUON_FORWARD or GLUON_BACKWARD) if it takes this case,
    else None: sm_90 only (the module imports Gluon, so it is imported only there), k and v like q,
    they and ``others`` contiguous and TMA-aligned."""
    if INTERPRET or q.device.type != "cuda" or torch.cuda.get_device_capability(q.device) != (9, 0):
        return None
    gluon = _gluon_module(name)
    takes = (gluon is not None and k.shape == v.shape == q.shape
             and all(t.is_contiguous() for t in (k, v, *others)) and _tma_layout_ok(q, k, v, *others)
             and gluon.supported(q, causal))
    return gluon if takes else None


def triton_forward(q, k, v, causal: bool, sm_scale: float, use_tma: bool | None = None, config=None):
    """Launch the forward on contiguous q, k, v: returns (o, lse), lse in base 2, float32 (B, H, N).

    The Gluon kernel where it takes the case (``gluon_kernel``), unless ``use_tma`` or ``config``
    asks for the Triton kernel: ``config`` (dict of BLOCK_M, BLOCK_N, num_warps, num_stages)
    overrides ``fwd_config``."""
    gluon = gluon_kernel(GLUON_FORWARD, q, k, v, causal) if use_tma is None and not config else None
    if gluon:
        return gluon.forward(q, k, v, causal, sm_scale)
    from kernels import flash_attention_triton as fat

    B, H, N, D = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    if use_tma is None:
        use_tma = _device_supports_tma(q.device) and _tma_layout_ok(q, k, v, o)
    if use_tma:
        _ensure_triton_allocator()
    args = (q, k, v, o, lse, sm_scale * LOG2E, N)
    if not config and INTERPRET:
        config = INTERPRET_FWD
    elif not config:
        from kernels.common import sm_count

        config = fwd_config(N, D, causal, B * H, sm_count(q.device))
    meta = dict(config)
    grid = (triton_cdiv(N, meta["BLOCK_M"]), B * H)
    fat.attn_fwd_kernel[grid](*args, HEAD_DIM=D, CAUSAL=causal, USE_TMA=use_tma, **meta)
    return o, lse


def triton_backward(q, k, v, o, lse, do, causal: bool, sm_scale: float, use_tma: bool | None = None,
                    config=None, variant: str | None = None):
    """dq, dk, dv from contiguous saved tensors and dO.

    The Gluon kernel (``flash_attention_gluon_bwd.py``) where it takes the case (``gluon_kernel``),
    unless ``use_tma``, ``config`` or ``variant`` asks for the Triton kernel: a delta = rowsum(dO*O)
    preprocess, then

    - "split" (default): one launch of dK/dV programs (key block, loop over queries) and dQ
      programs (query block, loop over keys); no atomics, S and dP computed by both;
    - "two": the same two kinds of program as two launches, each with its own launch parameters.

    ``config`` (launch parameters; for "two" a dict with "dkdv" and "dq" entries) overrides
    ``bwd_config``."""
    from kernels import flash_attention_triton as fat
    from kernels.common import sm_count

    B, H, N, D = q.shape
    do = do.contiguous()
    chosen = use_tma is None and config is None and variant is None
    gluon = gluon_kernel(GLUON_BACKWARD, q, k, v, causal, o, do, lse) if chosen else None
    if gluon:
        return gluon.backward(q, k, v, o, lse, do, causal, sm_scale)
    variant = variant or BWD_VARIANT
    if variant not in BWD_VARIANTS:
        raise ValueError(f"unknown backward variant {variant!r} (one of {BWD_VARIANTS})")
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    small = causal and small_grid(B * H, N, sm_count(q.device))
    if use_tma is None:
        use_tma = (bwd_tma(N, D, causal, small) and _device_supports_tma(q.device)
                   and _tma_layout_ok(q, k, v, do, dq, dk, dv))
    if use_tma:
        _ensure_triton_allocator()
    delta = torch.empty_like(lse)
    pre_block = 64 if INTERPRET else 128
    fat.attn_bwd_delta_kernel[(triton_cdiv(N, pre_block), B * H)](o, do, delta, N, HEAD_DIM=D, BLOCK_M=pre_block)
    args = (q, k, v, do, dq, dk, dv, lse, delta, sm_scale * LOG2E, sm_scale, N)
    if config is None and INTERPRET:
        interp = dict(INTERPRET_BWD)
        config = interp if variant == "split" else {"dkdv": interp, "dq": interp}
    elif config is None:
        config = bwd_config(N, D, variant, small)

    rows_tma = use_tma and N % 4 == 0 and N >= ROWS_TMA_FROM_N  # each head's row 16-byte aligned

    def launch(meta, programs, mode):
        grid = (programs, B * H)
        fat.attn_bwd_kernel[grid](*args, HEAD_DIM=D, CAUSAL=causal, USE_TMA=use_tma, MODE=mode,
                                  ROWS_TMA=rows_tma, **meta)

    if variant == "split":
        launch(config, triton_cdiv(N, config["BLOCK_N1"]) + triton_cdiv(N, config["BLOCK_M2"]), 0)
    else:
        launch(config["dkdv"], triton_cdiv(N, config["dkdv"]["BLOCK_N1"]), 1)
        launch(config["dq"], triton_cdiv(N, config["dq"]["BLOCK_M2"]), 2)
    return dq, dk, dv


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


class FlashAttention(torch.autograd.Function):
    """Forward saves q, k, v, o and the log-sum-exp (never P); backward recomputes P blockwise."""

    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale, use_tma):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        o, lse = triton_forward(q, k, v, causal, sm_scale, use_tma)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale, ctx.use_tma = causal, sm_scale, use_tma
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = triton_backward(q, k, v, o, lse, do, ctx.causal, ctx.sm_scale, ctx.use_tma)
        return dq, dk, dv, None, None, None


def flash_attention(q, k, v, causal: bool = False, sm_scale: float | None = None, *,
                    use_tma: bool | None = None) -> torch.Tensor:
    """Triton FlashAttention, differentiable in q, k, v. ``use_tma=None`` picks tensor descriptors
    when the device has TMA (Hopper+) and the data is aligned, else pointer loads (other GPUs, the
    CPU interpreter); True/False force one path (the interpreter runs both). ``sm_scale`` must be
    positive: the kernels fold it into the softmax's exponent after the row maximum and the mask."""
    _check_inputs(q, k, v)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(q.shape[-1])
    if not sm_scale > 0:
        raise ValueError(f"flash_attention: sm_scale {sm_scale} is not positive")
    return FlashAttention.apply(q, k, v, bool(causal), float(sm_scale), use_tma)


# ----------------------------------------------------------------------------------------------
# peers
# ----------------------------------------------------------------------------------------------
def torch_manual(q, k, v, causal: bool = False) -> torch.Tensor:
    """Materializes the (B, H, N, N) scores (matmul in the input dtype, then float32), a float32
    softmax, and the probabilities cast back for the second matmul."""
    N, D = q.shape[-2], q.shape[-1]
    s = torch.matmul(q, k.transpose(-2, -1)).float()
    s.mul_(1.0 / math.sqrt(D))
    if causal:
        s.masked_fill_(torch.ones(N, N, dtype=torch.bool, device=q.device).triu_(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p.to(q.dtype), v)


# Peak bytes per element of the (B, H, N, N) scores that torch_manual holds (measured, plus ~10%
# room: docs/kernels/flash_attention.md), for unavailable_reason's memory check.
MANUAL_BYTES_PER_SCORE = {"fwd": 11, "bwd": 18}


def manual_memory_need(shape, direction: str = "fwd") -> int:
    B, H, N, _ = shape
    return MANUAL_BYTES_PER_SCORE[direction] * B * H * N * N


def _sdpa(backend_name: str) -> Callable:
    def fn(q, k, v, causal: bool = False):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(getattr(SDPBackend, backend_name)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    fn.__name__ = f"sdpa_{backend_name.lower()}"
    return fn


torch_flash = _sdpa("FLASH_ATTENTION")
torch_cudnn = _sdpa("CUDNN_ATTENTION")
torch_efficient = _sdpa("EFFICIENT_ATTENTION")

_SDPA_CHECKS = {  # impl -> (SDPBackend name, torch.backends.cuda checker)
    "torch_flash": ("FLASH_ATTENTION", "can_use_flash_attention"),
    "torch_cudnn": ("CUDNN_ATTENTION", "can_use_cudnn_attention"),
    "torch_efficient": ("EFFICIENT_ATTENTION", "can_use_efficient_attention"),
}


@functools.cache
def _compiled_manual():
    return torch.compile(torch_manual, dynamic=False, options=common.compile_options())


def _no_donated_buffers():
    """Compile backward graphs without donated buffers: the perf tests time the backward alone,
    again and again on one forward (retain_graph=True), which donated buffers forbid."""
    import torch._functorch.config as functorch_config

    return functorch_config.patch(donated_buffer=False)


def compiled(q, k, v, causal: bool = False) -> torch.Tensor:
    """torch.compile (Inductor) of torch_manual, built once per process."""
    with _no_donated_buffers():
        return _compiled_manual()(q, k, v, causal)


@functools.cache
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


def _causal_mod(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


@functools.cache
def _causal_block_mask(n: int, device: str):
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(_causal_mod, B=None, H=None, Q_LEN=n, KV_LEN=n, device=device)


def flex(q, k, v, causal: bool = False) -> torch.Tensor:
    """flex_attention under torch.compile; causal via a (cached) block mask."""
    mask = _causal_block_mask(q.shape[-2], str(q.device)) if causal else None
    with _no_donated_buffers():
        return _compiled_flex()(q, k, v, block_mask=mask)


def triton_impl(q, k, v, causal: bool = False) -> torch.Tensor:
    """The Triton FlashAttention with default scale and path."""
    return flash_attention(q, k, v, causal)


IMPLS: dict[str, Callable] = {
    "triton": triton_impl,
    "torch_manual": torch_manual,
    "torch_flash": torch_flash,
    "torch_cudnn": torch_cudnn,
    "torch_efficient": torch_efficient,
    "compiled": compiled,
    "flex": flex,
}


def unavailable_reason(impl: str, q: torch.Tensor, causal: bool, direction: str = "fwd") -> str | None:
    """Why ``impl`` cannot run this case on this machine (checked before calling), or None.

    ``q`` is a representative input (its shape, dtype, device and requires_grad matter)."""
    shape = tuple(q.shape)
    if impl in _SDPA_CHECKS:
        backend, checker = _SDPA_CHECKS[impl]
        if q.device.type != "cuda":
            if impl == "torch_flash":
                return None  # PyTorch has a CPU flash kernel
            return f"SDPA {backend} needs a CUDA device"
        check = getattr(torch.backends.cuda, checker, None)
        if check is not None:
            from torch.backends.cuda import SDPAParams

            params = SDPAParams(q, q, q, None, 0.0, causal, False)
            if not check(params, False):
                return (f"SDPA {backend} is unavailable for {q.dtype} {shape}"
                        f"{' causal' if causal else ''} on {torch.cuda.get_device_name(q.device)}")
        return None
    if impl in ("torch_manual", "compiled") and q.device.type == "cuda":
        need = manual_memory_need(shape, direction)
        free, _ = torch.cuda.mem_get_info(q.device)
        if need > free:
            return (f"out of memory (predicted): {impl} needs ~{need / 2**30:.1f} GiB for the "
                    f"{shape[0]}x{shape[1]}x{shape[2]}x{shape[2]} scores and probabilities, "
                    f"{free / 2**30:.1f} GiB free")
    if impl == "flex" and q.device.type == "cpu" and direction == "bwd":
        return "FlexAttention has no backward on CPU"
    if impl == "triton" and shape[-1] not in SUPPORTED_HEAD_DIMS:
        return f"triton impl supports head dims {SUPPORTED_HEAD_DIMS}"
    return None
