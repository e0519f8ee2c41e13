"""The plan `gpuperf ab` hands each of its pytest processes (`--gpuperf-ab-plan=FILE`, JSON): which
tests to run, and the timing method each test's base side took first, so that every round of both
sides times a test the same way (a method switch alone moves some medians by 10%)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..core.files import atomic_write_text


@dataclass
class Plan:
    select: list[str] | None = None  # the node ids to run; None runs every collected test
    methods: dict[str, str] = field(default_factory=dict)  # node id -> Method value to prefer

    def write(self, path: Path) -> None:
        atomic_write_text(Path(path), json.dumps({"select": self.select, "methods": self.methods}, indent=1))

    @classmethod
    def read(cls, path: Path) -> "Plan":
        """The plan in `path`; ValueError naming the file when it is not one."""
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not a readable gpuperf ab plan ({exc})") from None
        if not isinstance(doc, dict):
            doc = {"methods": None}  # not a mapping: refused below like a bad one
        select, methods = doc.get("select"), doc.get("methods")
        if not ((select is None or isinstance(select, list)) and isinstance(methods, dict)):
            raise ValueError(f"{path}: not a gpuperf ab plan (expected {{\"select\": [...] | null, \"methods\": {{}}}})")
        return cls([str(s) for s in select] if select is not None else None,
                   {str(k): str(v) for k, v in methods.items()})
