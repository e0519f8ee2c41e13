"""GeLU in both forms torch offers, in five implementations.

- approximate="tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (F.gelu(approximate="tanh"))
- approximate="erf":  0.5 x (1 + erf(x / sqrt(2)))                       (F.gelu(), the exact form)

Every implementation is `fn(x, approximate="tanh")`, so IMPLS stays name -> callable and a perf
test passes the form as a keyword. Any shape; float32, bfloat16 or float16; bf16/fp16 math in fp32.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels import common, cuda_ext

APPROXIMATIONS = ("tanh", "erf")
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_SQRT_HALF = math.sqrt(0.5)


def _check(approximate: str) -> None:
    if approximate not in APPROXIMATIONS:
        raise ValueError(f"approximate must be one of {APPROXIMATIONS}, got {approximate!r}")


def reference(x: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    """GeLU in float64, straight from the defining formula."""
    _check(approximate)
    x = x.double()
    if approximate == "tanh":
        return 0.5 * x * (1.0 + torch.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + torch.erf(x * _SQRT_HALF))


def make_inputs(shape, dtype: torch.dtype, device, seed: int = 0) -> tuple[torch.Tensor]:
    return (common.randn_input(shape, dtype, device, seed),)


def cost(shape, dtype: torch.dtype, approximate: str = "tanh") -> tuple[int, int]:
    """(bytes, flops): the input read once, the output written once. Flops per element, a
    transcendental counted as one: tanh form 9 (x^3 two, *0.044715, +x, *sqrt(2/pi), tanh, +1,
    *0.5, *x); erf form 5 (/sqrt(2), erf, +1, *0.5, *x)."""
    _check(approximate)
    return common.streaming_cost(shape, dtype, 9 if approximate == "tanh" else 5)


# --- torch_manual: elementary ops, as written without knowing F.gelu -------------------------
def torch_manual(x: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    _check(approximate)
    xf = x.float()  # fp32 math for bf16/fp16, one rounding at the end
    if approximate == "tanh":
        y = 0.5 * xf * (1.0 + torch.tanh(_SQRT_2_OVER_PI * (xf + 0.044715 * torch.pow(xf, 3))))
    else:
        y = 0.5 * xf * (1.0 + torch.erf(xf * _SQRT_HALF))
    return y.to(x.dtype)


def torch_builtin(x: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    _check(approximate)
    return F.gelu(x, approximate="tanh" if approximate == "tanh" else "none")


_compiled_fn = common.lazy_compile(torch_manual)  # torch.compile(torch_manual), built on first use


def compiled(x: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    return _compiled_fn()(x, approximate)


# --- triton ------------------------------------------------------------------------------------
@triton.jit
def _gelu_f32(x, TANH: tl.constexpr):
    if TANH:
        # 0.5 x (1 + tanh(u)) == x * sigmoid(2u): no cancellation for x << 0, and one exp.
        u2 = 1.5957691216057308 * (x + 0.044715 * x * x * x)
        return x / (1.0 + tl.exp(-u2))
    else:
        return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, TANH: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr,
                 INT64: tl.constexpr, EVICT: tl.constexpr):
    common.elementwise_block(x_ptr, y_ptr, n, _gelu_f32, TANH, BLOCK, EVEN, INT64, EVICT)


def triton_gelu(x: torch.Tensor, approximate: str = "tanh", *, block: int | None = None,
                num_warps: int | None = None, evict: str = "") -> torch.Tensor:
    """`block`, `num_warps`, `evict`: launch overrides for tuning (common.launch_elementwise); both
    forms share the defaults, which the sweep found best for the erf form too (in bf16 its
    arithmetic still costs ~4% against a copy)."""
    _check(approximate)
    return common.launch_elementwise(_gelu_kernel, x, block=block, num_warps=num_warps, evict=evict,
                                     TANH=approximate == "tanh")


# --- CUDA C++ ----------------------------------------------------------------------------------
def cuda_gelu(x: torch.Tensor, approximate: str = "tanh", *, unroll: int = 4) -> torch.Tensor:
    _check(approximate)
    return cuda_ext.load("elementwise").gelu(x, approximate, unroll)


IMPLS: dict[str, Callable[..., torch.Tensor]] = {
    "torch_manual": torch_manual,
    "torch": torch_builtin,
    "compiled": compiled,
    "triton": triton_gelu,
    "cuda": cuda_gelu,
}
