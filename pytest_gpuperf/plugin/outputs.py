"""Where the run will write, checked at configure time: a path that cannot be written is a usage
error that names its option before any test runs, not a failure after all the measuring.

Checks create nothing: each path's nearest existing directory must allow writing (os.access)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest


def can_write(directory: Path) -> bool:
    """Whether files can be created in an existing directory."""
    return os.access(directory, os.W_OK | os.X_OK)


def _problem(path: Path, is_dir: bool) -> str | None:
    """Why `path` (a file, or a directory when is_dir) cannot be written, or None. Files are written
    through a temp file beside them, so their directory must allow creating files."""
    if path.exists():
        if path.is_dir() != is_dir:
            return "is not a directory" if is_dir else "is a directory; give a file path"
        if not is_dir and not os.access(path, os.W_OK):
            return "is not writable"
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
    path that cannot be written."""
    for where, path, is_dir in outputs:
        if path is None:
            continue
        problem = _problem(Path(path), is_dir)
        if problem is not None:
            raise pytest.UsageError(f"gpuperf: {where}: {path} {problem}")
