"""Where the run will write, checked at configure time: a path that cannot be written, or an output
whose library is not installed, is a usage error that names its option before any test runs, not a
failure after all the measuring.

Each path's nearest existing directory is probed by creating and removing a file there: permission
bits do not bind root (CI containers), nor tell of a read-only mount or a pseudo file system."""
from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

import pytest

#: Options whose output needs an optional library: (module, how to install it).
LIBRARIES = {"--gpuperf-plot": ("matplotlib", "pip install 'pytest-gpuperf[plot]'")}


def can_write(directory: Path) -> bool:
    """Whether a file can be created in an existing directory, found by creating one and removing it."""
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".gpuperf-probe-")
    except OSError:
        return False
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        return False  # files made there could not be replaced or cleaned up either
    return True


def write_failure(where: str, path: Path, exc: Exception) -> str:
    """One output's write error naming the user's path (an OSError may name the temp file written
    beside it) and, for a missing library, how to install it."""
    reason = getattr(exc, "strerror", None) or str(exc)
    fix = f"; {LIBRARIES[where][1]}" if isinstance(exc, ImportError) and where in LIBRARIES else ""
    return f"{where}: cannot write {path} ({reason}){fix}"


def _problem(path: Path, is_dir: bool) -> str | None:
    """Why `path` (a file, or a directory when is_dir) cannot be written, or None. Files are written
    through a temp file beside them and renamed over the old one, so their directory must allow
    creating files."""
    if path.exists():
        if path.is_dir() != is_dir:
            return "is not a directory" if is_dir else "is a directory; give a file path"
        directory = path if is_dir else path.parent
        if not can_write(directory):
            return "is not writable" if is_dir else f"cannot be replaced: {directory} is not writable"
        return None
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot be created: {parent} is not a directory"
    if not can_write(parent):
        return f"cannot be created: {parent} is not writable"
    return None


def check_outputs(outputs: list[tuple[str, Path | None, bool]]) -> None:
    """(what names it: an option or ini key, path or None, is a directory) -> UsageError on the first
    output whose library is missing or whose path cannot be written."""
    for where, path, is_dir in outputs:
        if path is None:
            continue
        module, install = LIBRARIES.get(where, (None, ""))
        if module is not None and importlib.util.find_spec(module) is None:
            raise pytest.UsageError(f"gpuperf: {where}: {module} is not installed; {install}")
        problem = _problem(Path(path), is_dir)
        if problem is not None:
            raise pytest.UsageError(f"gpuperf: {where}: {path} {problem}")
