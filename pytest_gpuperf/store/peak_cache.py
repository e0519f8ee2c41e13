"""The peaks' entry in pytest's cache, written from outside a pytest run (`gpuperf device --refresh`).

pytest keeps each cache value as JSON in `<cache_dir>/v/<key>` (its documented layout); `pytest
--gpuperf` reads the entry back through `config.cache`.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..core.files import atomic_write_text

#: pytest's default cache directory, relative to the directory pytest runs from.
DEFAULT_CACHE_DIR = ".pytest_cache"
#: What pytest writes into a new cache directory so that git ignores it.
_GITIGNORE = "# Created by pytest automatically.\n*\n"


def peaks_path(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "v" / key


def write_peaks(cache_dir: Path, key: str, peaks: dict[str, float]) -> Path:
    """Store `peaks` under `key` the way pytest's cache.set does (sorted, indented JSON); returns the file."""
    cache_dir = Path(cache_dir)
    new = not cache_dir.exists()
    path = peaks_path(cache_dir, key)
    atomic_write_text(path, json.dumps(peaks, indent=2, sort_keys=True))
    if new:
        (cache_dir / ".gitignore").write_text(_GITIGNORE, encoding="utf-8")
    return path
