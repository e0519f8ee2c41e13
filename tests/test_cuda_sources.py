"""Every kernels/cuda/*.cu compiles with nvcc, so a syntax error cannot land through CPU-only CI.

Compile-only: device code for sm_90 through ptxas, host code through the EDG front end and
`g++ -fsyntax-only` (full semantic checks, no code generation: about a third faster than a real
host compile, the same errors). The flags are the ones torch.utils.cpp_extension builds with
(COMMON_NVCC_FLAGS, C++20, the extension-name and ABI macros) and torch's include paths plus
Python's. A CPU-only torch wheel ships c10/cuda's headers but not the CMake-generated
c10/cuda/impl/cuda_cmake_macros.h they include: a one-line stand-in is put on the include path
last, so the real one wins wherever it exists. (ATen/cuda/CUDAContext.h still cannot compile
without the CUDA math libraries' headers; kernels use c10/cuda/CUDAStream.h for the stream.)

All files compile in parallel, one nvcc per core. Most of the time goes into parsing torch's
headers: every file includes them only in the host pass (common.cuh), which spares the device pass
that parse (docs/kernels/README.md, "The test command on a CPU").
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

CUDA_DIR = Path(__file__).resolve().parents[1] / "kernels" / "cuda"
ARCH = "sm_90"
TIMEOUT_S = 900


def _flags(shim: Path) -> list[str]:
    import torch
    from torch.utils import cpp_extension

    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    includes = [*cpp_extension.include_paths(), sysconfig.get_paths()["include"], str(shim)]
    return [
        f"-arch={ARCH}", "-std=c++20", *cpp_extension.COMMON_NVCC_FLAGS,
        "-DTORCH_API_INCLUDE_EXTENSION_H", "-DTORCH_EXTENSION_NAME=gpuperf_compile_check",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}", *(f"-I{p}" for p in includes),
        "-Xcompiler", "-fsyntax-only", "-c", "-o", os.devnull,
    ]


def _shim_dir(root: Path) -> Path:
    header = root / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return root


def _compile(nvcc: str, source: Path, flags: list[str]) -> tuple[Path, int, str]:
    try:
        proc = subprocess.run([nvcc, *flags, str(source)], capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return source, -1, f"nvcc did not finish in {TIMEOUT_S} s"
    return source, proc.returncode, proc.stdout + proc.stderr


def _errors(output: str, keep: int = 40) -> str:
    """The diagnostics worth reading: error lines and the few lines after each; else the tail."""
    lines = output.splitlines()
    picked: list[str] = []
    for i, line in enumerate(lines):
        if "error" in line.lower():
            picked.extend(lines[i:i + 4])
    return "\n".join((picked or lines)[-keep:])


def test_cuda_sources_compile(tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH: the CUDA C++ sources cannot be compile-checked here")
    pytest.importorskip("torch", reason="torch's headers are needed to compile the extensions")
    sources = sorted(CUDA_DIR.glob("*.cu"))
    assert sources, f"no .cu files under {CUDA_DIR}"
    flags = _flags(_shim_dir(tmp_path / "shim"))
    workers = max(1, min(len(sources), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda src: _compile(nvcc, src, flags), sources))
    failed = [(src, rc, out) for src, rc, out in results if rc != 0]
    report = "\n\n".join(f"{src.name} (exit {rc}):\n{_errors(out)}" for src, rc, out in failed)
    assert not failed, f"{len(failed)} of {len(sources)} CUDA sources failed to compile for {ARCH}:\n{report}"
