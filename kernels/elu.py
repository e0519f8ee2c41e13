"""ELU (alpha = 1): y = x if x > 0 else exp(x) - 1, in five implementations.

All implementations take one tensor of any shape (float32, bfloat16 or float16) and return a new
tensor of the same shape and dtype; bf16/fp16 are computed in fp32.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels import common, cuda_ext

ALPHA = 1.0


def reference(x: torch.Tensor) -> torch.Tensor:
    """ELU in float64 (expm1, so small negative inputs keep full relative accuracy)."""
    x = x.double()
    return torch.where(x > 0, x, ALPHA * torch.expm1(x))


def make_inputs(shape, dtype: torch.dtype, device, seed: int = 0) -> tuple[torch.Tensor]:
    return (common.randn_input(shape, dtype, device, seed),)


def cost(shape, dtype: torch.dtype) -> tuple[int, int]:
    """(bytes, flops): the input read once and the output written once; 3 flops per element
    (compare, exp, subtract; the exp counted as one)."""
    return common.streaming_cost(shape, dtype, 3)


# --- torch_manual: elementary ops, as written without knowing F.elu --------------------------
def torch_manual(x: torch.Tensor) -> torch.Tensor:
    xf = x.float()  # fp32 math for bf16/fp16 (in bf16, exp(x) - 1 would lose every digit near 0)
    y = torch.where(xf > 0, xf, ALPHA * (torch.exp(xf) - 1))
    return y.to(x.dtype)


def torch_builtin(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x, alpha=ALPHA)


_compiled_fn = common.lazy_compile(torch_manual)  # torch.compile(torch_manual), built on first use


def compiled(x: torch.Tensor) -> torch.Tensor:
    return _compiled_fn()(x)


# --- triton ------------------------------------------------------------------------------------
@triton.jit
def _elu_f32(x, alpha):
    return tl.where(x > 0, x, alpha * (tl.exp(x) - 1.0))


@triton.jit
def _elu_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr, EVEN: tl.constexpr, INT64: tl.constexpr,
                EVICT: tl.constexpr):
    common.elementwise_block(x_ptr, y_ptr, n, _elu_f32, alpha, BLOCK, EVEN, INT64, EVICT)


def triton_elu(x: torch.Tensor, *, block: int | None = None, num_warps: int | None = None,
               evict: str = "") -> torch.Tensor:
    """`block`, `num_warps`, `evict`: launch overrides for tuning (common.launch_elementwise)."""
    return common.launch_elementwise(_elu_kernel, x, ALPHA, block=block, num_warps=num_warps, evict=evict)


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
