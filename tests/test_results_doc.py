"""docs/results.py: the tables of docs/results-<key>.md are the ones generated from the committed baselines."""
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
def test_results_page_tables_match_the_committed_baselines(key):
    results = _results_module()
    tables = results.tables(bl.load(ROOT / "baselines" / f"{key}.yaml").entries)
    page = (ROOT / "docs" / f"results-{key}.md").read_text(encoding="utf-8")
    assert results.generated_block(page) == tables, (
        f"docs/results-{key}.md is stale: python docs/results.py baselines/{key}.yaml --write docs/results-{key}.md")


def test_write_replaces_only_the_generated_block():
    results = _results_module()
    page = f"# title\n\nbefore\n{results.BEGIN}\nold\n{results.END}\nafter\n"
    new = results.replace_block(page, "| a |\n| --- |")
    assert new == f"# title\n\nbefore\n{results.BEGIN}\n| a |\n| --- |\n{results.END}\nafter\n"
    assert results.generated_block(new) == "| a |\n| --- |"


def test_results_plots_are_generated_from_the_h100_baseline(tmp_path):
    results = _results_module()
    base = bl.load(ROOT / "baselines" / "nvidia-h100-80gb-hbm3.yaml")
    results.plots(base, tmp_path / "new", "h100")
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["h100-attention-fwd.png", "h100-softmax.png"]
