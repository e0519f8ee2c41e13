"""docs/results.py: the README's results tables are the ones generated from the committed H100 baseline."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from pytest_gpuperf import baseline as bl

ROOT = Path(__file__).resolve().parents[1]


def _results_module():
    spec = importlib.util.spec_from_file_location("results_doc", ROOT / "docs" / "results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_tables_match_the_committed_baseline(tmp_path):
    results = _results_module()
    base = bl.load(ROOT / "baselines" / "nvidia-h100-80gb-hbm3.yaml")
    tables = results.tables(base.entries)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for block in tables.split("\n\n"):
        assert block in readme, "README's results are stale: regenerate them with docs/results.py\n" + block
    results.plots(base, tmp_path / "new", "h100")
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["h100-attention-fwd.png", "h100-softmax.png"]
