"""The kernel protocol every kernels/<name>.py provides (``KernelModule``, checked by
tests/test_kernel_protocol.py), and the mechanics the kernel modules share word for word: the
seeded input factory, the streaming cost model, lazy ``torch.compile``, the SM count, and the
elementwise Triton block and launcher. Each kernel module keeps its own reference, inputs, cost
and IMPLS.
"""
from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Iterable
from pathlib import Path
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


def files_digest(paths: Iterable[Path]) -> str:
    """SHA-256 over the files' names and contents, in the order given: what a build or a compile of
    them depends on, whatever folder they sit in."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def streaming_cost(shape, dtype: torch.dtype, flops_per_element: int) -> tuple[int, int]:
    """(bytes, flops) of one pass over a tensor: the input read once, the output (same shape and
    dtype) written once, `flops_per_element` per element."""
    n = math.prod(shape)
    return 2 * n * torch.empty((), dtype=dtype).element_size(), flops_per_element * n


def compile_options() -> dict[str, bool]:
    """Inductor options of the suite's torch.compile references: no code choice made by timing
    candidates while compiling (pointwise autotuning off, one reduction config), so that every
    process compiles the same code for a function. Autotuned, one function's code differed by up to
    1.8x between processes, which a gate cannot tell from a change (docs/gate.md, "Code that differs between processes")."""
    import torch._inductor.config as inductor

    options = {"triton.autotune_pointwise": False}
    if hasattr(inductor, "deterministic"):
        options["deterministic"] = True
    return options


def lazy_compile(fn: Callable) -> Callable[[], Callable]:
    """A function that returns torch.compile(fn), building it on its first call only.

    Static shapes (dynamic=False): each shape gets the kernel Inductor would generate for it alone;
    the recompile limit is raised so that the suite's shapes x dtypes never fall back to eager
    silently. Inductor's defaults otherwise, apart from compile_options()."""

    @functools.cache
    def build() -> Callable:
        import torch._dynamo

        config = torch._dynamo.config
        limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
        setattr(config, limit, max(getattr(config, limit), 64))
        return torch.compile(fn, dynamic=False, options=compile_options())

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


#: Launch defaults of the elementwise kernels (4 KiB of input per program on 4 warps), from
#: `python -m kernels.tune_streaming`; the sweep: docs/kernels/elementwise.md.
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
