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
# GeLU-erf is x * Phi(x). Phi(-|x|) = erfc(|x| / sqrt 2) / 2 is computed as t * exp2(q(t) - x^2
# log2(e) / 2), t = 1 / (1 + |x| / (2 sqrt 2)), with q a fitted polynomial (relative error of erfc
# 2.2e-7 at degree 8 for fp32 outputs, 7.6e-6 at degree 5 for 16-bit): no cancellation for x << 0,
# and cheaper than libdevice's erf. The fit and its measurements: docs/kernels/elementwise.md.
@triton.jit
def _phi_of_minus_abs(x, PRECISE: tl.constexpr):
    t = 1.0 / (1.0 + tl.abs(x) * 0.35355339059327373)
    if PRECISE:
        q = 0.107156169 * t - 0.772518527
        q = q * t + 2.0740778
        q = q * t - 2.51466201
        q = q * t + 1.19520234
        q = q * t - 0.327712026
        q = q * t + 0.630854542
        q = q * t + 1.43290479
        q = q * t - 2.8253034
    else:
        q = 0.330088907 * t - 1.02318643
        q = q * t + 0.684591598
        q = q * t + 0.367063172
        q = q * t + 1.46868764
        q = q * t - 2.82723386
    return t * tl.math.exp2(q - x * (x * 0.7213475204444817))


@triton.jit
def _gelu_f32(x, FORM: tl.constexpr):
    """FORM 0: tanh approximation; 1: erf form, float32 output; 2: erf form, 16-bit output."""
    if FORM == 0:
        # 0.5 x (1 + tanh(u)) == x * sigmoid(2u): no cancellation for x << 0, and one exp.
        u2 = 1.5957691216057308 * (x + 0.044715 * x * x * x)
        return x / (1.0 + tl.exp(-u2))
    else:
        h = _phi_of_minus_abs(x, FORM == 1)
        return x * tl.where(x >= 0, 1.0 - h, h)


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, FORM: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr,
                 INT64: tl.constexpr, EVICT: tl.constexpr):
    common.elementwise_block(x_ptr, y_ptr, n, _gelu_f32, FORM, BLOCK, EVEN, INT64, EVICT)


def triton_gelu(x: torch.Tensor, approximate: str = "tanh", *, block: int | None = None,
                num_warps: int | None = None, evict: str = "") -> torch.Tensor:
    """`block`, `num_warps`, `evict`: launch overrides for tuning (common.launch_elementwise); both
    forms share the defaults."""
    _check(approximate)
    form = 0 if approximate == "tanh" else 1 if x.dtype == torch.float32 else 2
    return common.launch_elementwise(_gelu_kernel, x, block=block, num_warps=num_warps, evict=evict, FORM=form)


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
