"""docs/results.py: the README's results tables are the ones generated from the committed baselines."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pytest_gpuperf.store import baseline as bl

ROOT = Path(__file__).resolve().parents[1]


def _results_module():
    spec = importlib.util.spec_from_file_location("results_doc", ROOT / "docs" / "results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("key", ["nvidia-h100-80gb-hbm3", "nvidia-h200"])
def test_readme_tables_match_the_committed_baselines(key):
    results = _results_module()
    tables = results.tables(bl.load(ROOT / "baselines" / f"{key}.yaml").entries)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index(f"(from `baselines/{key}.yaml`)"):]
    section = section[:section.find("\n## ")]
    for block in tables.split("\n\n"):
        assert block in section, f"README's {key} results are stale: regenerate them with docs/results.py\n" + block


def test_readme_plots_are_generated_from_the_h100_baseline(tmp_path):
    results = _results_module()
    base = bl.load(ROOT / "baselines" / "nvidia-h100-80gb-hbm3.yaml")
    results.plots(base, tmp_path / "new", "h100")
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["h100-attention-fwd.png", "h100-softmax.png"]
