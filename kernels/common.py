"""The kernel protocol every kernels/<name>.py provides, and pieces the one-input kernels
(elu.py, gelu.py, softmax.py) share word for word.

- ``KernelModule``: what a kernel module provides (tests/test_kernel_protocol.py checks each one).
- ``randn_input``: the input factory behind their ``make_inputs`` (random normal, seeded).
- ``streaming_cost``: the cost model of a kernel that reads its input once and writes an output
  of the same size once.
- ``lazy_compile``: ``torch.compile(torch_manual)`` built on first use, static shapes.
- ``sm_count``: a device's multiprocessor count, which grids of persistent or few programs are sized by.
- Elementwise Triton kernels (elu, gelu): ``elementwise_block`` (one program's block, jit),
  and ``launch_elementwise`` (the host side, with the tuned launch defaults).

Each kernel module keeps its reference, make_inputs, cost, impls and IMPLS; only the shared
mechanics live here.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import torch
import triton
import triton.language as tl


#: The kernel modules that provide KernelModule (kernels/<name>.py).
KERNEL_MODULES = ("elu", "gelu", "softmax", "matmul", "flash_attention")


@runtime_checkable
class KernelModule(Protocol):
    """What every kernels/<name>.py provides, as module-level names (a module satisfies a Protocol
    whose members are its functions, PEP 544). Options beyond the listed parameters (GeLU's
    ``approximate``, attention's ``causal``/``backward``) are keyword arguments with defaults.

    - ``make_inputs(shape, dtype, device, seed=0)``: the seeded input tensors of one case, a tuple
      passed positionally to ``reference`` and to every implementation.
    - ``reference(*inputs, **options)``: the exact answer in float64, what outputs are checked against.
    - ``cost(shape, dtype, **options)``: ``(bytes, flops)`` of one call, the minimum traffic and the
      arithmetic, which make a time read as GB/s, TFLOP/s and % of peak.
    - ``IMPLS``: implementation name (a test id part, e.g. ``"triton"``) -> callable with the
      reference's signature, returning the output in the inputs' dtype.
    """

    IMPLS: dict[str, Callable[..., torch.Tensor]]

    def make_inputs(self, shape, dtype: torch.dtype, device, seed: int = 0) -> tuple[torch.Tensor, ...]: ...

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor: ...

    def cost(self, shape, dtype: torch.dtype) -> tuple[int, int]: ...


def randn_input(shape, dtype: torch.dtype, device, seed: int = 0) -> torch.Tensor:
    """Standard-normal values of `shape` and `dtype` on `device`, from a generator seeded with `seed`."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(tuple(shape), generator=gen, device=device, dtype=dtype)


def streaming_cost(shape, dtype: torch.dtype, flops_per_element: int) -> tuple[int, int]:
    """(bytes, flops) of one pass over a tensor: the input read once, the output (same shape and
    dtype) written once, `flops_per_element` per element."""
    n = math.prod(shape)
    return 2 * n * torch.empty((), dtype=dtype).element_size(), flops_per_element * n


def lazy_compile(fn: Callable) -> Callable[[], Callable]:
    """A function that returns torch.compile(fn), building it on its first call only.

    Static shapes (dynamic=False): each shape gets the kernel Inductor would generate for it alone;
    the recompile limit is raised so that the suite's shapes x dtypes never fall back to eager
    silently. Inductor's defaults otherwise, pointwise autotuning included, though it times two
    launch configs per kernel when first compiled and may pick either in a process: a GeLU-tanh
    at 4096^2 read 46.7 µs in eight H100 recordings and 48.9 µs in the ninth (the baseline's drift
    now holds both). Without it, the heuristic config made a 1x(2^20+7) bf16 GeLU 37% slower than
    what torch.compile gives by default."""

    @functools.cache
    def build() -> Callable:
        import torch._dynamo

        config = torch._dynamo.config
        limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
        setattr(config, limit, max(getattr(config, limit), 64))
        return torch.compile(fn, dynamic=False)

    return build


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """Multiprocessors of a CUDA device (cached); 4 for any other device (the Triton interpreter
    runs programs one after another: any small number will do)."""
    if device.type != "cuda":
        return 4
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


# --- elementwise Triton kernels ----------------------------------------------------------------
@triton.jit
def elementwise_block(x_ptr, y_ptr, n, fn, arg, BLOCK: tl.constexpr, EVEN: tl.constexpr, INT64: tl.constexpr,
                      EVICT: tl.constexpr):
    """This program's BLOCK elements of y = fn(x, arg), computed in fp32 (fn: a jit function of an
    fp32 block and `arg`). EVEN: every block is full (n % BLOCK == 0); INT64: offsets need 64 bits;
    EVICT: the loads' L2 eviction policy ("" for none)."""
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    start = pid * BLOCK
    offs = start + tl.arange(0, BLOCK)
    if EVEN:  # every block full: no masks, 16-byte vector accesses
        x = tl.load(x_ptr + offs, eviction_policy=EVICT).to(tl.float32)
        tl.store(y_ptr + offs, fn(x, arg).to(y_ptr.dtype.element_ty))
    elif start + BLOCK <= n:  # full block of a ragged tensor: still unmasked
        x = tl.load(x_ptr + offs, eviction_policy=EVICT).to(tl.float32)
        tl.store(y_ptr + offs, fn(x, arg).to(y_ptr.dtype.element_ty))
    else:  # the one partial block
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        tl.store(y_ptr + offs, fn(x, arg).to(y_ptr.dtype.element_ty), mask=mask)


#: Launch defaults of the elementwise kernels, from `python -m kernels.tune_streaming` on an H100 at
#: 16384^2: 4 KiB of input per program on 4 warps, loads without an eviction hint. So ELU and both
#: GeLUs reached 100.0-100.1% of the GB/s of a copy of the same bytes in fp32, ELU and GeLU-tanh
#: 100.4-100.5% in bf16 (GeLU-erf bf16 96.2% with libdevice's erf; its own erfc form since: 100.3%);
#: "evict_first" on the loads cost 1.4% everywhere, and the earlier 32 KiB programs on 8 warps 1-2% more.
ELEMENTWISE_BLOCK_BYTES = 4096
ELEMENTWISE_WARPS = 4


def launch_elementwise(kernel, x: torch.Tensor, *args, block: int | None = None, num_warps: int | None = None,
                       evict: str = "", **constexprs) -> torch.Tensor:
    """y = kernel over a contiguous copy of x, one program per BLOCK elements:
    kernel[grid](x, y, n, *args, BLOCK=, EVEN=, INT64=, EVICT=, num_warps=, **constexprs).
    `block`, `num_warps` and `evict` (the loads' eviction policy) override the defaults above."""
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return y
    block = block or ELEMENTWISE_BLOCK_BYTES // x.element_size()
    grid = (triton.cdiv(n, block),)
    kernel[grid](x, y, n, *args, BLOCK=block, EVEN=n % block == 0, INT64=n + block >= 2**31, EVICT=evict,
                 num_warps=num_warps or ELEMENTWISE_WARPS, **constexprs)
    return y
