"""ELU (alpha = 1): y = x if x > 0 else exp(x) - 1, in five implementations.

All implementations take one tensor of any shape (float32, bfloat16 or float16) and return a new
tensor of the same shape and dtype; bf16/fp16 are computed in fp32.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels import cuda_ext

ALPHA = 1.0


def reference(x: torch.Tensor) -> torch.Tensor:
    """ELU in float64 (expm1, so small negative inputs keep full relative accuracy)."""
    x = x.double()
    return torch.where(x > 0, x, ALPHA * torch.expm1(x))


def make_inputs(shape, dtype: torch.dtype, device, seed: int = 0) -> tuple[torch.Tensor]:
    gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(tuple(shape), generator=gen, device=device, dtype=dtype),)


def cost(shape, dtype: torch.dtype) -> tuple[int, int]:
    """(bytes, flops): the input read once and the output written once; 3 flops per element
    (compare, exp, subtract; the exp counted as one)."""
    n = math.prod(shape)
    return 2 * n * torch.empty((), dtype=dtype).element_size(), 3 * n


# --- torch_manual: elementary ops, as written without knowing F.elu --------------------------
def torch_manual(x: torch.Tensor) -> torch.Tensor:
    xf = x.float()  # fp32 math for bf16/fp16 (in bf16, exp(x) - 1 would lose every digit near 0)
    y = torch.where(xf > 0, xf, ALPHA * (torch.exp(xf) - 1))
    return y.to(x.dtype)


def torch_builtin(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x, alpha=ALPHA)


@functools.cache
def _compiled_fn() -> Callable:
    """torch.compile(torch_manual), built on first use. Static shapes (dynamic=False): each shape
    gets the kernel Inductor would generate for it alone; the recompile limit is raised so that the
    suite's shapes x dtypes never fall back to eager silently."""
    import torch._dynamo

    config = torch._dynamo.config
    limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, limit, max(getattr(config, limit), 64))
    return torch.compile(torch_manual, dynamic=False)


def compiled(x: torch.Tensor) -> torch.Tensor:
    return _compiled_fn()(x)


# --- triton ------------------------------------------------------------------------------------
@triton.jit
def _elu_f32(x, alpha):
    return tl.where(x > 0, x, alpha * (tl.exp(x) - 1.0))


@triton.jit
def _elu_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr, EVEN: tl.constexpr, INT64: tl.constexpr):
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    start = pid * BLOCK
    offs = start + tl.arange(0, BLOCK)
    if EVEN:  # every block full: no masks, 16-byte vector accesses
        x = tl.load(x_ptr + offs, eviction_policy="evict_first").to(tl.float32)
        tl.store(y_ptr + offs, _elu_f32(x, alpha).to(y_ptr.dtype.element_ty))
    elif start + BLOCK <= n:  # full block of a ragged tensor: still unmasked
        x = tl.load(x_ptr + offs, eviction_policy="evict_first").to(tl.float32)
        tl.store(y_ptr + offs, _elu_f32(x, alpha).to(y_ptr.dtype.element_ty))
    else:  # the one partial block
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        tl.store(y_ptr + offs, _elu_f32(x, alpha).to(y_ptr.dtype.element_ty), mask=mask)


def elementwise_config(n: int, element_size: int) -> tuple[int, int]:
    """(BLOCK, num_warps): 32 KiB of input per program (8 KiB for tiny tensors), 8 warps."""
    block = 32768 // element_size if n * element_size >= (1 << 22) else 8192 // element_size
    return block, 8


def triton_elu(x: torch.Tensor, *, block: int | None = None, num_warps: int | None = None) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return y
    dblock, dwarps = elementwise_config(n, x.element_size())
    block, num_warps = block or dblock, num_warps or dwarps
    grid = (triton.cdiv(n, block),)
    _elu_kernel[grid](x, y, n, ALPHA, BLOCK=block, EVEN=n % block == 0, INT64=n + block >= 2**31,
                      num_warps=num_warps)
    return y


# --- CUDA C++ ----------------------------------------------------------------------------------
def cuda_elu(x: torch.Tensor, *, unroll: int = 4) -> torch.Tensor:
    return cuda_ext.load("elementwise").elu(x, ALPHA, unroll)


IMPLS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "torch_manual": torch_manual,
    "torch": torch_builtin,
    "compiled": compiled,
    "triton": triton_elu,
    "cuda": cuda_elu,
}
