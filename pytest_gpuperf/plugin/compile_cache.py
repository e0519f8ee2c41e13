"""--gpuperf-compile-cache DIR: the caches a suite's first calls fill (Triton's binaries, Inductor's
compiled graphs and autotuning, torch's extension builds, the graph node gap) in subfolders of one
folder, which a CI job can keep between jobs and a user can clear in one place.

The folders are set as environment variables before any conftest is imported, so everything that
compiles in this process sees them, and so do the processes it starts (pytest-xdist's workers, the
counting pass, Inductor's and the Triton precompile's pools). A variable already in the environment is
left as it is: the user's choice, or the controller's for a worker."""
from __future__ import annotations

import importlib.metadata
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..core.files import ignored_by_git
from ..measure.node_gap import CACHE_DIR_ENV
from .outputs import check_outputs

OPTION = "--gpuperf-compile-cache"
INI = "gpuperf_compile_cache"
COMPILE_CACHE = pytest.StashKey["CompileCache"]()


def _extensions_folder() -> str:
    """torch's extension builds per Python and torch version, as torch's own default folder keeps them
    per Python and CUDA version: with TORCH_EXTENSIONS_DIR set it adds no such level, and a build
    left by another torch would be loaded as it is."""
    python = f"py{sys.version_info.major}{sys.version_info.minor}"
    try:
        return f"torch_extensions/{python}_torch{importlib.metadata.version('torch')}"
    except importlib.metadata.PackageNotFoundError:
        return f"torch_extensions/{python}"


def folders() -> tuple[tuple[str, str], ...]:
    """(environment variable, its subfolder of DIR) for every cache the option points."""
    return (("TRITON_CACHE_DIR", "triton"),
            ("TORCHINDUCTOR_CACHE_DIR", "inductor"),  # FX graphs, AOTAutograd, autotuning: on by default
            ("TORCH_EXTENSIONS_DIR", _extensions_folder()),
            (CACHE_DIR_ENV, "gpuperf"))  # the graph node gap (measure/node_gap.py)


@dataclass(frozen=True)
class CompileCache:
    """Where the compile caches went: the folder, what named it, the variables set and those kept."""

    folder: Path
    where: str  # the option or the ini key
    placed: tuple[str, ...]  # variables pointed into `folder`
    kept: tuple[tuple[str, str], ...]  # (variable, value) already in the environment, left as they were

    def describe(self) -> str:
        """The session header's line."""
        text = f"gpuperf: compile caches in {self.folder} ({self.where}): {', '.join(self.placed) or 'none'}"
        if self.kept:
            text += "; as already set: " + ", ".join(f"{name}={value}" for name, value in self.kept)
        return text


def _given(config: pytest.Config) -> tuple[Path, str] | None:
    """(the folder, what named it) from the option (relative to the current directory) or the ini
    key (relative to the rootdir); None when neither is given."""
    value = getattr(config.known_args_namespace, "gpuperf_compile_cache", None)
    if value:
        return config.invocation_params.dir / value, OPTION
    value = config.getini(INI)
    if value:
        return config.rootpath / value, f"ini key {INI}"
    return None


def apply(config: pytest.Config) -> CompileCache | None:
    """Point the caches at the given folder's subfolders, made here; a folder that cannot be written is
    a usage error naming the option. None (nothing changed) without the option and the ini key."""
    given = _given(config)
    if given is None:
        return None
    folder, where = given
    folder = Path(os.path.abspath(folder))  # the same place for processes started elsewhere (gpuperf ab)
    check_outputs([(where, folder, True)])
    new = not folder.exists()
    placed, kept = [], []
    for name, sub in folders():
        if name in os.environ:
            kept.append((name, os.environ[name]))
            continue
        path = folder / sub
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise pytest.UsageError(f"gpuperf: {where}: cannot create {path} ({exc.strerror or exc})") from None
        os.environ[name] = str(path)
        placed.append(name)
    if new and placed:  # a folder made here, perhaps inside a checkout: nothing in it is to commit
        ignored_by_git(folder, "compile caches of --gpuperf-compile-cache")
    cache = CompileCache(folder, where, tuple(placed), tuple(kept))
    config.stash[COMPILE_CACHE] = cache
    return cache
