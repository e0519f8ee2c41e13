"""kernels/precompile.compile_all: a specialization compiled into a Triton cache once is not handed to
the worker pool again while nothing it depends on changed (CPU: the pool is replaced by a fake)."""
from __future__ import annotations

import pytest

from kernels import precompile

SPECS = {'{"name": "k1"}': ("kernels.elu", "_elu_kernel"), '{"name": "k2"}': ("kernels.gelu", "_gelu_kernel")}


@pytest.fixture
def pool(monkeypatch, tmp_path):
    """The specialization data each pool start was given; data containing "bad" fails to compile."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    starts: list[set[str]] = []

    def fake(specs, workers):
        starts.append(set(specs))
        return [data for data in specs if "bad" not in data]

    monkeypatch.setattr(precompile, "_compile_in_pool", fake)
    return starts


def test_what_compiled_once_skips_the_pool_in_later_processes(pool):
    assert precompile.compile_all(SPECS) == precompile.Precompiled(compiled=2, earlier=0, failed=0)
    assert precompile.compile_all(SPECS) == precompile.Precompiled(compiled=0, earlier=2, failed=0)
    assert pool == [set(SPECS)]
    more = dict(SPECS, **{'{"name": "k3"}': ("kernels.elu", "_elu_kernel")})
    assert precompile.compile_all(more) == precompile.Precompiled(compiled=1, earlier=2, failed=0)
    assert pool[-1] == {'{"name": "k3"}'}


def test_a_failed_compile_is_tried_again_and_the_rest_is_kept(pool):
    specs = dict(SPECS, **{'{"name": "bad"}': ("kernels.elu", "_elu_kernel")})
    assert precompile.compile_all(specs) == precompile.Precompiled(compiled=2, earlier=0, failed=1)
    assert precompile.compile_all(specs) == precompile.Precompiled(compiled=0, earlier=2, failed=1)
    assert pool[-1] == {'{"name": "bad"}'}


def test_another_ptxas_compiles_again(pool, monkeypatch):
    precompile.compile_all(SPECS)
    monkeypatch.setenv("TRITON_PTXAS_PATH", "/elsewhere/ptxas")
    assert precompile.compile_all(SPECS).compiled == 2


def test_an_unreadable_record_compiles_everything_and_is_replaced(pool, tmp_path):
    (tmp_path / precompile.DONE_FILE).write_text("{not json", encoding="utf-8")
    assert precompile.compile_all(SPECS).compiled == 2
    assert precompile.compile_all(SPECS).earlier == 2


@pytest.mark.parametrize("text", ["[[1], 2]", '{"a": 3}', '"x"'])
def test_a_record_of_other_things_is_read_as_empty(pool, tmp_path, text):
    (tmp_path / precompile.DONE_FILE).write_text(text, encoding="utf-8")
    assert precompile.compile_all(SPECS).compiled == 2
    assert precompile.compile_all(SPECS).earlier == 2


def test_the_record_keeps_the_newest_contexts_only(pool, monkeypatch, tmp_path):
    """Each edit of the kernels' sources is a new context: the record stays bounded."""
    import json

    for i in range(precompile.KEPT_CONTEXTS + 2):
        monkeypatch.setenv("TRITON_PTXAS_PATH", f"/ptxas/{i}")
        precompile.compile_all(SPECS)
    assert len(json.loads((tmp_path / precompile.DONE_FILE).read_text())) == precompile.KEPT_CONTEXTS
    monkeypatch.setenv("TRITON_PTXAS_PATH", "/ptxas/0")  # dropped: compiles again
    assert precompile.compile_all(SPECS).compiled == 2
    monkeypatch.setenv("TRITON_PTXAS_PATH", f"/ptxas/{precompile.KEPT_CONTEXTS + 1}")
    assert precompile.compile_all(SPECS).earlier == 2


def test_processes_with_shares_compile_disjoint_parts_that_cover_every_specialization(pool):
    """pytest-xdist's workers: each compiles its share; together they compile each specialization once,
    and all of it counts as compiled before for a later process."""
    specs = {f'{{"name": "k{i}"}}': ("kernels.elu", "_elu_kernel") for i in range(12)}
    done = [precompile.compile_all(specs, share=(i, 3)) for i in range(3)]
    assert sum(d.compiled for d in done) == 12 and all(d.others + d.compiled == 12 - d.earlier for d in done)
    assert set().union(*pool) == set(specs) and sum(len(p) for p in pool) == 12
    assert precompile.compile_all(specs) == precompile.Precompiled(compiled=0, earlier=12, failed=0)
