"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never half of one; and
where a baseline's writers lock it."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def default_mode() -> int:
    """0o666 less the process's umask: the mode a plain open() would create a file with."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def file_mode(path: Path) -> int:
    """The permission bits of an existing file, else default_mode()."""
    try:
        return Path(path).stat().st_mode & 0o777
    except OSError:
        return default_mode()


def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write `text` through a temp file in the same directory, fsync and rename. `mode` defaults to
    0o666 less the umask."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        mode = default_mode()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


#: Folder, inside a baseline's directory, of the lock files its writers take.
LOCK_DIR = ".gpuperf-locks"


def lock_file(path: Path) -> Path:
    """The lock file of baseline ``path``: ``<dir>/.gpuperf-locks/<name>.lock``, in a folder whose own
    ``.gitignore`` ignores it all (as pytest's ``.pytest_cache``), so a save leaves nothing to commit."""
    # Kept, not removed after a save: a waiter could then hold the unlinked file while a newcomer locks a new one.
    folder = Path(path).parent / LOCK_DIR
    folder.mkdir(exist_ok=True)
    ignored_by_git(folder, "lock files of --gpuperf-save")
    return folder / (Path(path).name + ".lock")


def ignored_by_git(folder: Path, what: str) -> None:
    """Give `folder` a ``.gitignore`` that ignores it all (as pytest's ``.pytest_cache``), unless it has one."""
    ignore = Path(folder) / ".gitignore"
    if not ignore.exists():  # concurrent writers write the same text
        ignore.write_text(f"# created by pytest-gpuperf: {what}\n*\n", encoding="utf-8")
