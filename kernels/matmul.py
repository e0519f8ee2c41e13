"""Matrix multiply C = A @ B: A is M x K, B is K x N (row-major, or K-major: the transpose of a
row-major N x K tensor, like an nn.Linear weight), C (M x N) in the inputs' dtype.

Impls (all take ``(a, b, *, tf32=False)`` and return C):
- ``torch``: ``torch.matmul`` (cuBLAS on CUDA).
- ``compiled``: ``torch.compile`` of ``torch.matmul`` (``dynamic=True``: one graph per dtype).
  Inductor lowers a lone matmul to cuBLAS, so this is cuBLAS plus the compiled wrapper's guards.
- ``triton``: tiled Triton GEMM, fp32 accumulation (``matmul_triton.py``; its config tables and
  per-GPU picks in ``matmul_configs.py``). On Hopper (sm_90+) with TMA-compatible layouts a
  persistent kernel (grouped tile order, TMA loads pipelined into wgmma, TMA stores); elsewhere a
  pointer kernel. Results and tuning history: docs/kernels/matmul.md.
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
from collections.abc import Callable

import torch

from kernels.matmul_triton import triton_matmul

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
