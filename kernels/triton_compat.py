"""What the Triton kernels of this suite need to run the same way on a GPU and under Triton's CPU
interpreter (TRITON_INTERPRET=1), in one place for kernels/matmul_triton.py and the flash-attention kernels.

- ``INTERPRET``: whether this process runs Triton under its interpreter (TRITON_INTERPRET=1 when
  this module is first imported; perf_tests/conftest.py sets it before any kernel module is).
- The NumPy index patch (applied on import, interpreter only; see ``patch_interpreter_index``):
  Triton 3.6's interpreter converts a scalar to a Python int with ``int(ndarray of shape (1,))``,
  which NumPy >= 2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars"), so
  every loop over run-time bounds (``range(lo, hi)``, ``tl.range(start, end, step)``) fails there.
- ``dot``: ``tl.dot`` with its operands widened to float32 first under the interpreter, whose
  ``tl.dot`` multiplies bfloat16 tiles as their raw uint16 bits (and float16 tiles in float16).
"""
from __future__ import annotations

import os

import triton
import triton.language as tl

INTERPRET: bool = os.environ.get("TRITON_INTERPRET", "0") == "1"

_PATCHED = "_gpuperf_numpy_index_patch"


def patch_interpreter_index() -> None:
    """Make the Triton interpreter's ``tensor.__index__`` convert through the single element
    (``.item()``: the same int, with any NumPy) instead of ``int(array)``.

    For Triton 3.6 (interpreter's ``_patch_lang_tensor``) with NumPy >= 2.4; a no-op with an older
    NumPy or a Triton without that hook. Idempotent: the patch marks itself and is applied once.
    Only the interpreter's patched scope changes; compiled kernels are untouched."""
    import numpy as np
    from triton.runtime import interpreter

    if tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 4):
        return
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, _PATCHED, False):
        return

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    setattr(patched, _PATCHED, True)
    interpreter._patch_lang_tensor = patched


if INTERPRET:
    patch_interpreter_index()


@triton.jit
def dot(a, b, acc=None, input_precision: tl.constexpr = None, WIDEN: tl.constexpr = INTERPRET):
    """``tl.dot(a, b, acc, input_precision=...)``; with WIDEN (by default: under the interpreter)
    the operands go to float32 first. Exact for bf16/fp16 values, so the numerics under test stay
    those of the GPU kernel: products of bf16/fp16 values are exact in fp32 and the accumulation
    is fp32 either way. Compiled code (WIDEN false): plain ``tl.dot``."""
    if WIDEN:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b, acc, input_precision=input_precision)
