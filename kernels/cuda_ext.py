"""Build the CUDA C++ kernels in kernels/cuda/ through torch.utils.cpp_extension, once per process.

torch caches the build under ~/.cache/torch_extensions, so a second run loads the compiled module
without calling nvcc again, as long as the build's command is unchanged. ninja rebuilds when a
source's path changes, so each build compiles a copy of its sources in a folder named by their
content (`stage`): the base revision of `gpuperf ab` (a worktree elsewhere) and the working tree
then share one build instead of rebuilding alternately in every pytest process. On a fresh
machine each extension takes ~20 s of nvcc: `prebuild` starts them in worker threads (nvcc runs
outside the GIL) so that they compile side by side, while the tests that need none of them run.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import torch

CUDA_DIR = Path(__file__).parent / "cuda"

_builds: dict[tuple[str, str, tuple[str, ...]], Future] = {}
_loaded: dict[tuple[str, tuple[str, ...]], ModuleType] = {}  # the per-call path: a dict lookup
_guard = threading.Lock()
_pool: ThreadPoolExecutor | None = None


class CudaUnavailable(RuntimeError):
    """Raised when a CUDA C++ kernel is asked for on a machine without a CUDA device."""


def load(name: str, *extra_cuda_cflags: str) -> ModuleType:
    """kernels/cuda/<name>.cu compiled for the current GPU's architecture (waits for a build
    `prebuild` started; a failed build raises here, in the test that needs it)."""
    module = _loaded.get((name, extra_cuda_cflags))
    if module is None:
        module = _loaded[(name, extra_cuda_cflags)] = _submit(name, extra_cuda_cflags).result()
    return module


def prebuild(names) -> None:
    """Start building these extensions in the background; `load` then waits for them."""
    for name in names:
        _submit(name, ())


def finish_builds() -> None:
    """Drop builds not started yet and wait for the running ones. Call before the process ends:
    a build killed midway leaves torch's lock file behind, on which every later build of that
    extension waits forever (remove ~/.cache/torch_extensions/*/gpuperf_<name>_*/lock then)."""
    global _pool
    with _guard:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)
    with _guard:
        for key in [k for k, f in _builds.items() if f.cancelled()]:
            del _builds[key]  # a later load() submits these again


def _submit(name: str, flags: tuple[str, ...]) -> Future:
    source = CUDA_DIR / f"{name}.cu"
    if not torch.cuda.is_available():
        raise CudaUnavailable(f"{source.relative_to(CUDA_DIR.parent.parent)} needs a CUDA device; none is visible")
    major, minor = torch.cuda.get_device_capability()  # here: the calling thread's current device
    arch = f"{major}{minor}a" if major >= 9 else f"{major}{minor}"
    global _pool
    with _guard:
        future = _builds.get((name, arch, flags))
        if future is None:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="gpuperf-nvcc")
            future = _builds[(name, arch, flags)] = _pool.submit(_build, source, arch, flags)
        return future


def stage(source: Path) -> Path:
    """`source` and the headers beside it, copied once into a folder named by their content under
    torch's extension build root; returns the copy of `source`. The folder never changes after it
    is made (another process making the same one first is fine)."""
    from torch.utils.cpp_extension import get_default_build_root

    from kernels.common import files_digest

    files = [source, *sorted(p for p in source.parent.glob("*.cuh") if p != source)]
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()) / "gpuperf-sources"
    folder = root / f"{source.stem}-{files_digest(files)[:16]}"
    if not folder.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
        staging.chmod(stat.S_IMODE(root.stat().st_mode))  # mkdtemp's 0700 would shut out a shared root's other users
        for path in files:
            shutil.copyfile(path, staging / path.name)
        try:
            staging.rename(folder)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not folder.is_dir():  # not made by another process meanwhile: a real failure
                raise
    return folder / source.name


def _build(source: Path, arch: str, flags: tuple[str, ...]) -> ModuleType:
    from torch.utils.cpp_extension import load as build

    tag = "_" + hashlib.sha1(" ".join(flags).encode()).hexdigest()[:8] if flags else ""
    staged = stage(source)
    return build(
        # the content digest in the name: two revisions' sources build side by side, not over each other
        name=f"gpuperf_{source.stem}_sm{arch}{tag}_{staged.parent.name.rsplit('-', 1)[1]}",
        sources=[str(staged)],
        extra_cuda_cflags=["-O3", "-lineinfo", f"-gencode=arch=compute_{arch},code=sm_{arch}", *flags],
        verbose=False,
    )
