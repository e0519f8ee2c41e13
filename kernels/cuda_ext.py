"""Build the CUDA C++ kernels in kernels/cuda/ through torch.utils.cpp_extension, once per process.

torch caches the build under ~/.cache/torch_extensions keyed by the source, so a second run loads
the compiled module without calling nvcc again.
"""
from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType

import torch

CUDA_DIR = Path(__file__).parent / "cuda"


class CudaUnavailable(RuntimeError):
    """Raised when a CUDA C++ kernel is asked for on a machine without a CUDA device."""


@functools.cache
def load(name: str, *extra_cuda_cflags: str) -> ModuleType:
    """Compile (or load from cache) kernels/cuda/<name>.cu for the current GPU's architecture."""
    source = CUDA_DIR / f"{name}.cu"
    if not torch.cuda.is_available():
        raise CudaUnavailable(f"{source.relative_to(CUDA_DIR.parent.parent)} needs a CUDA device; none is visible")
    from torch.utils.cpp_extension import load as build

    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}a" if major >= 9 else f"{major}{minor}"
    return build(
        name=f"gpuperf_{name}_sm{arch}",
        sources=[str(source)],
        extra_cuda_cflags=["-O3", "-lineinfo", f"-gencode=arch=compute_{arch},code=sm_{arch}", *extra_cuda_cflags],
        verbose=False,
    )
