"""The Triton matmul's per-GPU-model picks: a launch with a pick runs only that config, one without
is autotuned over its candidates, and the committed picks name configs of the tables."""
from __future__ import annotations

import torch
import yaml

from kernels import matmul_configs, matmul_triton
from kernels.matmul_configs import PTR_TABLE, TMA_FIELDS, TMA_TABLE, unique


class _Tensor:
    """Stands in for C in the autotuner's arguments: the pruner reads only its device."""
    device = torch.device("cuda", 0)


def _prune(monkeypatch, picks: dict, m: int = 4096, n: int = 4096, k: int = 4096, **kwargs) -> list[tuple]:
    monkeypatch.setattr(matmul_configs, "picks", lambda index: picks)
    prune = matmul_configs.pruner(TMA_TABLE, TMA_FIELDS, "tma")
    configs = [matmul_configs.make_config(TMA_FIELDS, v) for v in unique(TMA_TABLE)]
    meta = dict(DTYPE="bf16", PRECISION="ieee", B_T=False, SWAP_AB=False) | kwargs
    kept = prune(configs, {"M": m, "N": n, "K": k, "c_ptr": _Tensor()}, **meta)
    return [matmul_configs.config_id(c, TMA_FIELDS) for c in kept]


def test_a_launch_with_a_pick_runs_only_the_pick(monkeypatch):
    pick = (128, 256, 64, 4, 8, 2, False)
    key = matmul_configs.pick_key("tma", 4096, 4096, 4096, "bf16", "ieee")
    assert _prune(monkeypatch, {key: pick}) == [pick]


def test_a_launch_without_a_pick_is_autotuned_over_its_candidates(monkeypatch):
    other = matmul_configs.pick_key("tma", 8192, 8192, 8192, "bf16", "ieee")
    kept = _prune(monkeypatch, {other: (128, 256, 64, 4, 8, 2, False)})
    assert kept == [v for v in TMA_TABLE[("16", "ieee")] if v[0] == 128]


def test_a_pick_that_is_no_candidate_is_ignored(monkeypatch):
    """A stale pick (a config since dropped from the table, or a 64-row tile for a large M) is not run."""
    key = matmul_configs.pick_key("tma", 4096, 4096, 4096, "bf16", "ieee")
    kept = _prune(monkeypatch, {key: (64, 256, 64, 4, 4, 2, False)})
    assert (64, 256, 64, 4, 4, 2, False) not in kept and len(kept) == 3


def test_candidates_and_the_pruner_agree_on_the_key(monkeypatch):
    """kernels/tune_matmul.py stores picks under candidates()'s key; the pruner looks them up under its own."""
    monkeypatch.setattr(matmul_triton, "_tma_capable", lambda device: True)
    a, b = torch.empty(64, 512), torch.empty(512, 1024)
    key, configs = matmul_triton.candidates(a, b, tf32=True)
    assert key == matmul_configs.pick_key("tma", 64, 1024, 512, "fp32", "tf32", swap_ab=True)
    values = [tuple(c[f] for f in TMA_FIELDS) for c in configs]
    kept = _prune(monkeypatch, {key: values[-1]}, m=64, n=1024, k=512, DTYPE="fp32", PRECISION="tf32",
                  SWAP_AB=True)
    assert kept == [values[-1]]


def test_the_committed_picks_are_configs_of_the_tables():
    table = yaml.safe_load(matmul_configs.PICKS_PATH.read_text())
    known = {"tma": set(unique(TMA_TABLE)), "ptr": set(unique(PTR_TABLE))}
    assert table, "kernels/matmul_picks.yaml holds no GPU model"
    for model, picks in table.items():
        for key, values in picks.items():
            assert tuple(values) in known[key.split()[0]], f"{model}: {key}: {values} is in no config table"


def test_pick_keys_name_kernel_shape_dtype_precision_and_b_form():
    assert matmul_configs.pick_key("tma", 1, 2, 3, "fp32", "tf32", b_t=True) == "tma 1x2x3 fp32 tf32 b_t"
    assert matmul_configs.pick_key("ptr", 4097, 4095, 1023, "bf16", "ieee") == "ptr 4097x4095x1023 bf16 ieee"
