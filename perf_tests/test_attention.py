"""Scaled dot-product attention, forward and backward: every impl of kernels/flash_attention.py.

Cases: impl x dtype (bfloat16, float16) x causal/full x shape (B, H, N, D) x direction. The
forward test times one call; the backward test times the backward alone (the forward runs once,
outside the timed call: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)). Outputs and
dQ, dK, dV are checked against the float64 reference (kernels.flash_attention.reference_grads)
with the module's tolerances (flash_attention.tolerance: atol scaled by the reference's RMS).

Shapes: two the CPU interpreter runs (N=77 crosses a partial block, N=128 whole blocks), the issue's
target B4 H16 N4096 D128, the same at D64, and B2 H8 N1000 D128 (partial last blocks at full size).

Kept out to hold the GPU suite to its time budget: ``compiled`` and ``flex`` run only at N=128 and
the target shape (every other shape is one more torch.compile of the same graph). On CPU
(no CUDA): Triton runs under TRITON_INTERPRET=1 at the small shapes (conftest.require), the SDPA
cuDNN / memory-efficient backends skip (CUDA only), flex skips its backward (none on CPU), and the
torch.compile impls run bfloat16 only (a compile costs seconds there).

Memory: test_attention_memory records the peak of a forward at B1 H16 D128 bf16, N = 4K, 16K, 64K
(torch_manual skips, with the size it would need, where that exceeds the free memory), and
test_triton_memory_linear_in_n checks that the Triton forward+backward's extra memory grows
linearly (x4 per x4 in N), measured with torch.cuda.max_memory_allocated after a warm-up call.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import gc
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import HAS_CUDA, require

from kernels import flash_attention as fa
from pytest_gpuperf.measure.peak_memory import call_peak

DTYPES = ["bfloat16", "float16"]
SMALL = [(1, 2, 77, 64), (1, 2, 128, 64)]
TARGET = (4, 16, 4096, 128)
SHAPES = SMALL + [TARGET, (4, 16, 4096, 64), (2, 8, 1000, 128)]
COMPILE_IMPLS = ("compiled", "flex")
COMPILE_SHAPES = [(1, 2, 128, 64), TARGET]
# smoke: an interpreter-only case on the CPU; on a GPU, cases whose run-to-run spread (0.3-0.4% on an
# H100 and an H200) lets them decide a 5% change against a baseline. The full (non-causal) B4 H16
# N4096 D64 case left it: its backward could only see 6.5-6.6% on two fresh H100s (docs/gate.md).
SMOKE = {("triton", "bfloat16", True, SMALL[0]), ("triton", "bfloat16", True, (4, 16, 4096, 64))}
MEMORY_NS = [4096, 16384, 65536]


def shape_id(shape) -> str:
    return "B{}H{}N{}D{}".format(*shape)


def _gpu_kept(impl: str, dtype: str, shape) -> bool:
    """The GPU suite's share of the matrix: every impl in bfloat16, float16 for Triton, and of the small
    interpreter shapes only N=128 (the smoke case's size); the rest would add minutes, not information."""
    if shape == SMALL[0]:
        return False
    return dtype == "bfloat16" or impl == "triton"


def _cases():
    for impl in fa.IMPLS:
        for dtype in DTYPES:
            for causal in (True, False):
                for shape in SHAPES:
                    if impl in COMPILE_IMPLS and shape not in COMPILE_SHAPES:
                        continue
                    if HAS_CUDA and not _gpu_kept(impl, dtype, shape):
                        continue
                    marks = [pytest.mark.smoke] if (impl, dtype, causal, shape) in SMOKE else []
                    yield pytest.param(impl, dtype, causal, shape, marks=marks,
                                       id=f"{impl}-{dtype}-{'causal' if causal else 'full'}-{shape_id(shape)}")


CASES = list(_cases())
#: Cases per (dtype, causal, shape): the impls that compare against one float64 reference.
_SHARING = collections.Counter(tuple(case.values[1:]) for case in CASES)


@functools.lru_cache(maxsize=None)
def _shared_reference(dtype: str, causal: bool, shape, device: str, direction: str):
    """The float64 reference of the case's inputs (fa.make_inputs' seed: every impl gets the same),
    computed once for all the impls that share it (0.1 s a backward at B4 H16 N4096 on an H200)."""
    q, k, v = fa.make_inputs(shape, getattr(torch, dtype), device)
    if direction == "fwd":
        return fa.reference(q, k, v, causal)
    return tuple(fa.reference_grads(q, k, v, fa.make_grad_output(shape, q.dtype, device), causal)[1:])


def _reference(dtype: str, causal: bool, shape, device: str, direction: str):
    """fwd: the output; bwd: (dq, dk, dv), kept where several impls share them (about 3 GiB of
    float64 on a GPU: the bfloat16 cases; freed after the module), else computed for this case alone."""
    if _SHARING[(dtype, causal, shape)] > 1:
        return _shared_reference(dtype, causal, shape, str(device), direction)
    return _shared_reference.__wrapped__(dtype, causal, shape, str(device), direction)


@pytest.fixture(scope="module", autouse=True)
def _free_references():
    yield
    _shared_reference.cache_clear()


def _numel(impl: str, shape) -> int:
    """Largest tensor the impl makes: the (B, H, N, N) scores for the materializing ones."""
    B, H, N, D = shape
    if impl in ("torch_manual", "compiled"):
        return max(B * H * N * N, B * H * N * D)
    return B * H * N * D


def _prepare(impl: str, dtype: str, causal: bool, shape, device, direction: str):
    """Skip what this machine cannot run (with the reason); return the inputs."""
    require(impl, _numel(impl, shape))
    if not HAS_CUDA and impl in COMPILE_IMPLS:
        if dtype != "bfloat16":
            pytest.skip(f"CPU run: {impl} (torch.compile, seconds per case there) runs bfloat16 only")
        if impl == "flex" and not causal:
            pytest.skip("CPU run: flex (a torch.compile of ~15 s per case there) runs the causal case only")
    q, k, v = fa.make_inputs(shape, getattr(torch, dtype), device)
    if direction == "bwd":
        for t in (q, k, v):
            t.requires_grad_(True)
    reason = fa.unavailable_reason(impl, q, causal, direction)
    if reason:
        pytest.skip(reason)
    return q, k, v


@pytest.mark.parametrize("impl,dtype,causal,shape", CASES)
def test_attention_fwd(impl, dtype, causal, shape, device, gpu_benchmark, gpu_assert_close):
    q, k, v = _prepare(impl, dtype, causal, shape, device, "fwd")
    nbytes, flops = fa.cost(shape, q.dtype, causal)
    out = gpu_benchmark(fa.IMPLS[impl], q, k, v, causal, bytes=nbytes, flops=flops)
    expected = _reference(dtype, causal, shape, device, "fwd")
    gpu_assert_close(out, expected, **fa.tolerance(expected, q.dtype))  # rms-scaled atol: see module


@pytest.mark.parametrize("impl,dtype,causal,shape", CASES)
def test_attention_bwd(impl, dtype, causal, shape, device, gpu_benchmark, gpu_assert_close):
    q, k, v = _prepare(impl, dtype, causal, shape, device, "bwd")
    dout = fa.make_grad_output(shape, q.dtype, device)
    out = fa.IMPLS[impl](q, k, v, causal)
    nbytes, flops = fa.cost(shape, q.dtype, causal, backward=True)
    grads = gpu_benchmark(torch.autograd.grad, out, (q, k, v), dout, retain_graph=True, bytes=nbytes, flops=flops)
    expected = _reference(dtype, causal, shape, device, "bwd")
    for name, got, exp in zip(("dq", "dk", "dv"), grads, expected):
        gpu_assert_close(got, exp, name=name, **fa.tolerance(exp, q.dtype))  # rms-scaled atol: see module


# ---- every Triton launch config, forced, at a length with partial blocks ----------------------
# Each table entry (launch parameters the kernels use) is checked here once.
CONFIG_SHAPE = (1, 2, 300, 64)  # 300 = 2 * 128 + 44: partial last block for every block size


def _config_cases():
    fwd = {*(c for pair in fa.FWD_CONFIGS.values() for c in pair), fa.SHORT_FWD, fa.FWD_NARROW}
    for values in sorted(fwd):
        bm, bn, w, s = values
        yield pytest.param("fwd", dict(zip(fa.FWD_FIELDS, values)), id=f"fwd-{bm}x{bn}-w{w}-s{s}")
    for values in sorted({*fa.BWD_CONFIGS.values(), fa.SHORT_BWD, fa.SMALL_GRID_BWD}):
        m1, n1, m2, n2, w, s = values
        yield pytest.param("split", dict(zip(fa.BWD_FIELDS, values)), id=f"split-{m1}x{n1}-{m2}x{n2}-w{w}-s{s}")
    yield pytest.param("two", fa.bwd_config(CONFIG_SHAPE[2], CONFIG_SHAPE[3], "two"), id="two")


def test_launch_parameters_follow_head_dim_masking_and_length():
    """Which table entry a case gets (no kernel runs): the D64 row for head dims up to 64, 64x64
    blocks below LONG_BLOCKS_FROM_N, and every pick within the kernels' block constraints."""
    short, long_n = fa.LONG_BLOCKS_FROM_N - 1, 4096
    assert fa.fwd_config(long_n, 128, False) == dict(zip(fa.FWD_FIELDS, fa.FWD_CONFIGS[128][0]))
    assert fa.fwd_config(long_n, 128, True) == dict(zip(fa.FWD_FIELDS, fa.FWD_CONFIGS[128][1]))
    for d in (16, 32, 64):
        assert fa.fwd_config(long_n, d, False) == dict(zip(fa.FWD_FIELDS, fa.FWD_CONFIGS[64][0]))
        assert fa.bwd_config(long_n, d, "split") == dict(zip(fa.BWD_FIELDS, fa.BWD_CONFIGS[64]))
    assert fa.fwd_config(short, 128, False) == dict(zip(fa.FWD_FIELDS, fa.SHORT_FWD))
    assert fa.bwd_config(short, 128, "split") == dict(zip(fa.BWD_FIELDS, fa.SHORT_BWD))
    # B2 H8 N1000: 128 programs of 128 rows on a 132-SM GPU take the small-grid blocks; B4 H16 do not
    assert fa.small_grid(16, 1000, 132) and not fa.small_grid(64, 1000, 132)
    assert fa.fwd_config(1000, 128, False, 16, 132) == dict(zip(fa.FWD_FIELDS, fa.SMALL_GRID_FWD))
    # B1 H8 N4096: 128 blocks of 256 rows on 132 SMs, 256 of 128 rows: the 128-row blocks
    assert fa.fwd_config(4096, 128, False, 8, 132) == dict(zip(fa.FWD_FIELDS, fa.FWD_NARROW))
    assert fa.fwd_config(4096, 128, False, 64, 132) == dict(zip(fa.FWD_FIELDS, fa.FWD_CONFIGS[128][0]))
    assert fa.bwd_config(1000, 128, "split", small=True) == dict(zip(fa.BWD_FIELDS, fa.SMALL_GRID_BWD))
    assert fa.fwd_config(short, 128, False, 16, 132) == dict(zip(fa.FWD_FIELDS, fa.SHORT_FWD))
    for n in (1, 77, short, fa.LONG_BLOCKS_FROM_N, 300, 1000, long_n):
        for d in fa.SUPPORTED_HEAD_DIMS:
            for causal in (False, True):
                f = fa.fwd_config(n, d, causal)
                assert f["BLOCK_M"] % f["BLOCK_N"] == 0
            metas = [fa.bwd_config(n, d, "split"), fa.bwd_config(n, d, "split", small=True),
                     *fa.bwd_config(n, d, "two").values()]
            assert all(m["BLOCK_N1"] % m["BLOCK_M1"] == 0 and m["BLOCK_M2"] % m["BLOCK_N2"] == 0 for m in metas)
    with pytest.raises(ValueError, match="unknown backward variant 'Split'"):
        fa.bwd_config(long_n, 128, "Split")
    # tile loads of the backward: plain loads only where BWD_TMA says so, for long sequences
    assert not fa.bwd_tma(long_n, 128, True) and fa.bwd_tma(long_n, 128, False) and fa.bwd_tma(long_n, 64, True)
    assert fa.bwd_tma(short, 128, True) and fa.bwd_tma(1000, 128, True, small=True)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("kind,config", list(_config_cases()))
def test_triton_config(kind, config, causal, device, gpu_assert_close):
    require("triton", math.prod(CONFIG_SHAPE))
    q, k, v = fa.make_inputs(CONFIG_SHAPE, torch.bfloat16, device, seed=3)
    do = fa.make_grad_output(CONFIG_SHAPE, torch.bfloat16, device, seed=3)
    scale = 1 / math.sqrt(CONFIG_SHAPE[-1])
    out, *expected = fa.reference_grads(q, k, v, do, causal)
    if kind == "fwd":
        o, lse = fa.triton_forward(q, k, v, causal, scale, config=config)
        gpu_assert_close(o, out, **fa.tolerance(out, q.dtype))
        return
    o, lse = fa.triton_forward(q, k, v, causal, scale)
    grads = fa.triton_backward(q, k, v, o, lse, do, causal, scale, config=config, variant=kind)
    for name, got, exp in zip(("dq", "dk", "dv"), grads, expected):
        gpu_assert_close(got, exp, name=name, **fa.tolerance(exp, q.dtype))


@pytest.mark.parametrize("use_tma,n", [(True, 77), (True, 76), (False, 77)],
                         ids=["descriptors", "descriptors-row-values", "pointers"])
def test_triton_load_paths(use_tma, n, device, gpu_assert_close, monkeypatch):
    """Both ways of moving tiles, forced: tensor descriptors (TMA on Hopper; emulated by the CPU
    interpreter) and masked pointer loads. By default the device's capability picks one. With
    descriptors and N % 4 == 0 (at any length here) the backward's lse/delta rows come by
    descriptor too, zeros past N."""
    monkeypatch.setattr(fa, "ROWS_TMA_FROM_N", 0)
    shape = (1, 2, n, 64)
    require("triton", math.prod(shape))
    if use_tma and HAS_CUDA and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tensor descriptors need sm_90+")
    q, k, v = (t.requires_grad_() for t in fa.make_inputs(shape, torch.float16, device, seed=4))
    do = fa.make_grad_output(shape, torch.float16, device, seed=4)
    out = fa.flash_attention(q, k, v, causal=True, use_tma=use_tma)
    grads = torch.autograd.grad(out, (q, k, v), do)
    expected = fa.reference_grads(q, k, v, do, causal=True)
    for name, got, exp in zip(("out", "dq", "dk", "dv"), (out, *grads), expected):
        gpu_assert_close(got, exp, name=name, **fa.tolerance(exp, q.dtype))


def test_triton_non_contiguous_inputs(device, gpu_assert_close):
    """q, k, v as (B, H, N, D) views of (B, N, H, D) storage (the usual projection layout)."""
    B, N, H, D = 1, 77, 2, 64
    require("triton", B * N * H * D)
    q, k, v = (t.transpose(1, 2).requires_grad_() for t in fa.make_inputs((B, N, H, D), torch.bfloat16, device, seed=5))
    assert q.shape == (B, H, N, D) and not q.is_contiguous()
    do = fa.make_grad_output((B, H, N, D), torch.bfloat16, device, seed=5)
    out = fa.flash_attention(q, k, v, causal=False)
    grads = torch.autograd.grad(out, (q, k, v), do)
    expected = fa.reference_grads(q, k, v, do, causal=False)
    for name, got, exp in zip(("out", "dq", "dk", "dv"), (out, *grads), expected):
        gpu_assert_close(got, exp, name=name, **fa.tolerance(exp, q.dtype))


# ---- memory ---------------------------------------------------------------------------------------
def _cuda_only():
    if not HAS_CUDA:
        pytest.skip("peak memory is measured with CUDA's allocator statistics; no CUDA device here")


def _extra_peak(fn) -> int:
    """Bytes requested at the peak of fn() beyond those held before it, counted as the harness counts
    a call's peak (requested, not the allocator's rounded blocks)."""
    gc.collect()  # garbage of earlier tests freed inside fn() would hide part of its peak
    result, peak = call_peak(torch, fn)
    del result
    return peak


@pytest.mark.parametrize("n", MEMORY_NS, ids=[f"B1H16N{n}D128" for n in MEMORY_NS])
@pytest.mark.parametrize("impl", ["triton", "torch_flash", "torch_manual"])
def test_attention_memory(impl, n, gpu_benchmark):
    """Peak memory of one forward (recorded in the baseline). Triton's must stay within a fixed
    number of bytes per token: inputs, output, log-sum-exp, no N x N anything."""
    _cuda_only()
    shape = (1, 16, n, 128)
    q, k, v = fa.make_inputs(shape, torch.bfloat16, "cuda")
    reason = fa.unavailable_reason(impl, q, False, "fwd")
    if reason:
        pytest.skip(reason)  # torch_manual at 64K: the needed size is in the reason
    nbytes, flops = fa.cost(shape, q.dtype)
    out = gpu_benchmark(fa.IMPLS[impl], q, k, v, False, bytes=nbytes, flops=flops)
    assert torch.isfinite(out).all()
    if impl != "triton":
        return
    stats = gpu_benchmark.stats
    if stats and stats.get("peak_memory_bytes"):
        peak = stats["peak_memory_bytes"]  # inputs + everything allocated in the call
    else:
        peak = _extra_peak(lambda: fa.IMPLS[impl](q, k, v, False)) + 3 * q.numel() * q.element_size()
    B, H, N, D = shape
    per_token = B * H * (4 * D * q.element_size() + 4)  # q, k, v, o and the float32 log-sum-exp
    slack = 64 << 20  # allocator rounding, Triton's descriptor scratch
    assert peak <= per_token * N + slack, f"peak {peak / 2**20:.1f} MiB > linear bound {(per_token * N + slack) / 2**20:.1f} MiB"


def test_triton_memory_linear_in_n():
    """Forward + backward extra memory at N = 4K, 16K, 64K (B1 H16 D128 bf16): x4 per x4 in N."""
    _cuda_only()
    extras = []
    for n in MEMORY_NS:
        shape = (1, 16, n, 128)
        q, k, v = (t.requires_grad_() for t in fa.make_inputs(shape, torch.bfloat16, "cuda"))
        dout = fa.make_grad_output(shape, torch.bfloat16, "cuda")

        def step():
            out = fa.flash_attention(q, k, v)
            return torch.autograd.grad(out, (q, k, v), dout)

        step()  # warm-up: compile (and the allocator settles) before the peak is read
        extras.append(_extra_peak(step))
        del q, k, v, dout
        torch.cuda.empty_cache()
    ratios = [b / a for a, b in zip(extras, extras[1:])]
    detail = ", ".join(f"N={n}: {e / 2**20:.0f} MiB" for n, e in zip(MEMORY_NS, extras))
    assert all(3.5 <= r <= 4.5 for r in ratios), f"extra memory not linear in N ({detail}; ratios {ratios})"


# ---- what runs on the device --------------------------------------------------------------------
@pytest.mark.parametrize("direction", ["fwd", "bwd"])
def test_triton_launches(direction, gpu_profile):
    """Forward: one kernel. Backward: the delta preprocess plus one Gluon kernel where it takes the
    case (an sm_90), else the Triton backward variant's launches."""
    if not HAS_CUDA:
        pytest.skip("launch counts need a CUDA device")
    shape = (1, 2, 256, 64)
    q, k, v = (t.requires_grad_() for t in fa.make_inputs(shape, torch.bfloat16, "cuda"))
    out = fa.flash_attention(q, k, v)
    if direction == "fwd":
        prof = gpu_profile(fa.flash_attention, q.detach(), k.detach(), v.detach())
        assert len(prof.find("attn_fwd_kernel")) == 1 and prof.launches == 1, prof.kernels
    else:
        dout = torch.randn_like(out)
        prof = gpu_profile(torch.autograd.grad, out, (q, k, v), dout, retain_graph=True)
        gluon = fa.gluon_kernel(fa.GLUON_BACKWARD, q.detach(), k.detach(), v.detach(), False)
        expected = 1 if gluon else {"split": 1, "two": 2}[fa.BWD_VARIANT]
        assert len(prof.find("attn_bwd_delta_kernel")) == 1, prof.kernels
        assert sum(k_.calls for k_ in prof.find(r"attn_bwd_kernel")) == expected, prof.kernels


#: Compiles the Gluon forward and the backward prototype for sm_90a and prints, as JSON, each
#: kernel's shared memory and an SM's: in a process of its own, as TRITON_INTERPRET=1 (the CPU
#: run's) turns Triton's own reductions into interpreted code.
GLUON_COMPILE = """
import dataclasses
import json
from kernels import flash_attention_gluon as fg, flash_attention_gluon_bwd as fgb
shared = {}
for module in (fg, fgb):
    for head_dim in (64, 128):
        kernel = module.compile_only(head_dim, causal=True)
        assert kernel.asm["cubin"] and "wgmma" in kernel.asm["ptx"]
        shared[f"{module.__name__.rsplit('_', 1)[-1]} {head_dim}"] = kernel.metadata.shared
# D64's three consumers (a ragged program at the compiled length): causal, masked blocks passed on
# unread and idle consumers skipped; without a mask; with ping-pong, whose idle consumers compute
for name, causal, pingpong in (("wide", True, False), ("wide full", False, False), ("wide ping-pong", True, True)):
    tiles = dataclasses.replace(fg.D64_WIDE_TILES, pingpong=pingpong)
    shared[f"gluon 64 {name}"] = fg.compile_only(64, causal=causal, tiles=tiles).metadata.shared
print("gluon-compiled " + json.dumps({"shared": shared, "limit": fg.SM_SHARED_BYTES}))
"""


def test_gluon_kernels_compile_for_hopper():
    """The Hopper forward (kernels/flash_attention_gluon.py) and backward (..._bwd.py) compile for
    sm_90a on any machine, their rings within an SM's shared memory: a CPU catches an edit that
    breaks them. A GPU host skips it (20 s of a GPU suite run): a Hopper runs the kernels
    themselves, and other GPUs never compile them."""
    if HAS_CUDA:
        pytest.skip("a CPU check: on a GPU host the attention tests run the kernels where they apply")
    pytest.importorskip("triton.experimental.gluon")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", GLUON_COMPILE], env=env, capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("gluon-compiled "))
    report = json.loads(line.split(" ", 1)[1])
    assert set(report["shared"]) == {"gluon 64", "gluon 128", "bwd 64", "bwd 128", "gluon 64 wide",
                                     "gluon 64 wide full", "gluon 64 wide ping-pong"}
    assert max(report["shared"].values()) <= report["limit"]


def test_gluon_tiles_and_dispatch():
    """The Gluon backward's default tiles fit an SM; shared dQ halves its staging (one half-width
    piece a consumer) and takes no ``dq_split``; a forward's launch bound must hold what setmaxnreg
    hands out; off sm_90 (here: a CPU) the Triton kernels run."""
    pytest.importorskip("triton.experimental.gluon")
    from kernels import flash_attention_gluon as fg, flash_attention_gluon_bwd as fgb

    two_per_sm = dataclasses.replace(fg.default_tiles(64), block_n=64, consumer_regs=104, launch_regs=80)
    assert two_per_sm.problem(64) is None
    assert "launch_regs" in dataclasses.replace(two_per_sm, consumer_regs=240).problem(64)

    for head_dim, tiles in fgb.DEFAULT_TILES.items():
        assert tiles.dq_shared and tiles.problem(head_dim) is None, (head_dim, tiles)
    own = fgb.Tiles(64, 64, 2, 240, 24, dq_split=2)
    shared = fgb.Tiles(64, 64, 2, 240, 24, dq_shared=True)
    assert own.smem_bytes(128) - shared.smem_bytes(128) == 2 * 64 * 64 * 4
    assert shared.dq_cols(128) == own.dq_cols(128) == 64
    assert "dq_split" in fgb.Tiles(64, 64, 2, 240, 24, dq_split=2, dq_shared=True).problem(128)
    q = torch.zeros((1, 2, 256, 64), dtype=torch.bfloat16)
    assert not fgb.supported(q, causal=True)
    assert fa.gluon_kernel(fa.GLUON_BACKWARD, q, q, q, True) is None


@pytest.mark.parametrize("n", [512, 640], ids=["one-idle", "two-idle"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_gluon_three_consumer_ragged_program(causal, n, gpu_assert_close):
    """D64's three-consumer tiles at a length that is not a multiple of their 192 rows (the path D64
    takes from N 2,048 without a mask and from 4,096 causal): causal consumers pass the key blocks
    right of their rows on unread, and the ragged program's one or two idle consumers (at the start
    when causal, else at the end) load and store nothing; o and lse as when they compute every block.
    With ping-pong, whose turns count every consumer's blocks, they compute."""
    if not HAS_CUDA or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Gluon kernels run on sm_90 only")
    from kernels import flash_attention_gluon as fg

    q, k, v = fa.make_inputs((2, 2, n, 64), torch.bfloat16, "cuda")
    expected = fa.reference(q, k, v, causal)
    o, lse = fg.forward(q, k, v, causal, 64 ** -0.5, tiles=fg.D64_WIDE_TILES)
    gpu_assert_close(o, expected, **fa.tolerance(expected, q.dtype))
    o_all, lse_all = fg.forward(q, k, v, causal, 64 ** -0.5, tiles=dataclasses.replace(fg.D64_WIDE_TILES,
                                                                                           skip_idle=False))
    assert torch.equal(o, o_all) and torch.equal(lse, lse_all)
    o_pp, _ = fg.forward(q, k, v, causal, 64 ** -0.5, tiles=dataclasses.replace(fg.D64_WIDE_TILES, pingpong=True))
    gpu_assert_close(o_pp, expected, name="ping-pong", **fa.tolerance(expected, q.dtype))


def test_attention_scale_must_be_positive():
    """The kernels fold sm_scale into the softmax's exponent after the row maximum and the mask: a
    scale that is not positive is refused in one line, before any launch."""
    q = torch.zeros((1, 1, 128, 64), dtype=torch.bfloat16)
    for scale in (0.0, -0.125, float("nan")):
        with pytest.raises(ValueError, match="sm_scale .* is not positive"):
            fa.flash_attention(q, q, q, causal=True, sm_scale=scale)


def test_triton_backward_takes_the_gluon_kernel_unless_told_otherwise(monkeypatch, device):
    """Where the Gluon backward takes a case (stubbed here) triton_backward runs it, unless use_tma,
    config or variant asks for the Triton kernel (tuning sweeps and the config tests rely on that)."""
    calls = []

    class Gluon:
        @staticmethod
        def backward(*args):
            calls.append(args)
            return "gluon"

    monkeypatch.setattr(fa, "gluon_kernel", lambda name, *tensors: Gluon if name == fa.GLUON_BACKWARD else None)
    q, k, v = fa.make_inputs((1, 1, 64, 64), torch.bfloat16, device)
    o, lse = fa.triton_forward(q, k, v, False, 0.125)
    assert fa.triton_backward(q, k, v, o, lse, q, False, 0.125) == "gluon" and len(calls) == 1
    for named in (dict(variant=fa.BWD_VARIANT), dict(use_tma=False)):
        grads = fa.triton_backward(q, k, v, o, lse, q, False, 0.125, **named)
        assert len(grads) == 3 and len(calls) == 1, named
