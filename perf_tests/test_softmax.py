"""Row-wise softmax: every impl of kernels/softmax.py by dtype and size.

Sizes: 64x64 (launch-bound), 4096x4096 (mid), 16384x16384 (large: the bandwidth figure),
1000x1001 (odd rows: no row is 16-byte aligned), 1x(2^20+7) and 4x262144 (long rows: Triton's
split-row kernel, CUDA's cluster-per-row kernel), and 3x20000 (rows longer than one Triton block,
small enough for the interpreter). Every case checks against the float64 reference. On CPU (no
CUDA): the torch impls up to 2^20 elements, Triton under TRITON_INTERPRET=1 up to 2^16 (where the
long-row kernel runs unsplit: split programs wait for each other, which the sequential interpreter
cannot do), CUDA C++ skipped (conftest.require).
"""
from __future__ import annotations

import math

import pytest
import torch
from conftest import impl_dtype_size_cases, needs_gpu, require, size_id

from kernels import softmax

CUDA_EXTENSIONS = ("softmax",)  # kernels/cuda/softmax.cu, built in the background from the start (conftest)

DTYPES = ["float32", "bfloat16", "float16"]
SIZES = [(64, 64), (4096, 4096), (16384, 16384), (1000, 1001), (1, 2**20 + 7), (4, 262144), (3, 20000)]
SMOKE = {("triton", "float32", (3, 20000)),  # the interpreter's
         ("triton", "float32", (16384, 16384))}  # the GPU's: it decides 5% (spread 0.3%)
HEADLINE, INTERPRETER_ONLY = (16384, 16384), ((3, 20000),)


def _cases():
    return impl_dtype_size_cases(softmax.IMPLS, DTYPES, SIZES, headline=HEADLINE, cpu_only=INTERPRETER_ONLY,
                                 smoke=SMOKE)


@pytest.mark.parametrize("impl,dtype,shape", list(_cases()))
def test_softmax(impl, dtype, shape, device, gpu_benchmark, gpu_assert_close):
    require(impl, math.prod(shape))
    dt = getattr(torch, dtype)
    (x,) = softmax.make_inputs(shape, dt, device)
    nbytes, flops = softmax.cost(shape, dt)
    out = gpu_benchmark(softmax.IMPLS[impl], x, bytes=nbytes, flops=flops)
    gpu_assert_close(out, softmax.reference(x))


# ---- NaN and Inf follow the reference -------------------------------------------------------------
# (numpy, under the Triton interpreter, warns about the inf - inf and 0 * inf these produce on purpose)
_quiet_numpy = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


@_quiet_numpy
@pytest.mark.parametrize("shape", [(6, 1001), (6, 20000)], ids=size_id)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("impl", list(softmax.IMPLS))
def test_softmax_nonfinite(impl, dtype, shape, device, gpu_assert_close):
    """Row 0 has a NaN, row 1 a +inf (both rows NaN), row 2 a -inf (exp gives 0 there), row 3 is
    all -inf (NaN, as x - max(x) = -inf - -inf), rows 4-5 are finite. 6x20000 is a long-row case."""
    require(impl, math.prod(shape))
    (x,) = softmax.make_inputs(shape, getattr(torch, dtype), device, seed=5)
    cols = shape[1]
    x[0, cols // 3] = float("nan")
    x[1, cols - 1] = float("inf")
    x[2, 0] = float("-inf")
    x[3, :] = float("-inf")
    ref = softmax.reference(x)
    assert ref[:2].isnan().all() and ref[3].isnan().all() and ref[2, 0] == 0 and ref[4:].isfinite().all()
    gpu_assert_close(softmax.IMPLS[impl](x), ref)


# ---- forced Triton configs: the paths the default dispatch does not take at small sizes -----------
def _forced_configs():
    rows, cols = 9, 1000
    persistent = softmax.rows_config(rows, cols, sms=1, programs_per_sm=2)  # 2 programs, BLOCK_M 4: 2 steps each
    yield pytest.param(persistent, id="rows-persistent")
    yield pytest.param(dict(softmax.rows_config(rows, cols, sms=1), BLOCK_M=1), id="rows-one-row-per-program")
    tiled = dict(kernel="long", splits=1, slice_len=cols, tiles=4, block=256, num_warps=4, keep="", drop="")
    yield pytest.param(tiled, id="long-unsplit-4-tiles")
    yield pytest.param(dict(tiled, keep="evict_last", drop="evict_first"), id="long-unsplit-4-tiles-hinted")
    yield pytest.param(dict(tiled, tiles=1, block=1024), id="long-unsplit-1-tile")


@_quiet_numpy  # rows past the end are all -inf (masked, never stored)
@pytest.mark.parametrize("config", list(_forced_configs()))
def test_triton_forced_config(config, device, gpu_assert_close):
    require("triton", 9 * 1000)
    (x,) = softmax.make_inputs((9, 1000), torch.float32, device, seed=7)
    gpu_assert_close(softmax.triton_softmax(x, config=config), softmax.reference(x))


@pytest.mark.parametrize("even", [True, False], ids=["unmasked", "masked"])
def test_triton_tiled_full_tiles(even, device, gpu_assert_close):
    """Rows that tiles cover exactly take unmasked loads (EVEN); forced masked, the same result."""
    require("triton", 5 * 1024)
    (x,) = softmax.make_inputs((5, 1024), torch.float32, device, seed=8)
    config = dict(kernel="long", splits=1, slice_len=1024, tiles=4, block=256, num_warps=4,
                  keep="evict_last", drop="evict_first", even=even)
    gpu_assert_close(softmax.triton_softmax(x, config=config), softmax.reference(x))


def test_long_row_launch_parameters():
    """Which long-row config a case gets (no kernel runs): split slices of up to 8192 elements are one
    tile; unsplit rows go in tiles of 4096 at 16 bytes per thread, hinted to stay in L2."""
    split = softmax.long_config(4, 262144, sms=132, interpreting=False)
    assert split["splits"] > 1 and split["tiles"] == 1 and split["block"] <= 8192
    fp32 = softmax.long_config(16384, 16384, sms=132, interpreting=False, elem_size=4)
    assert (fp32["splits"], fp32["tiles"], fp32["block"], fp32["num_warps"]) == (1, 4, 4096, 32)
    assert (fp32["keep"], fp32["drop"]) == ("evict_last", "evict_first")
    assert softmax.long_config(8192, 32768, sms=132, interpreting=False, elem_size=2)["num_warps"] == 16
    assert softmax.long_config(3, 20000, sms=132, interpreting=True)["splits"] == 1  # interpreter: never split


# ---- what runs on the device ------------------------------------------------------------------------
PROFILE_SHAPES = [(1000, 1001), (16384, 16384), (4, 262144)]  # warp/row kernel, block kernel, long rows


@pytest.mark.parametrize("shape", PROFILE_SHAPES, ids=size_id)
@pytest.mark.parametrize("impl", ["triton", "cuda"])
def test_softmax_fused_is_one_launch(impl, shape, device, gpu_profile):
    """One kernel for every row length, long rows split over many programs/blocks included."""
    needs_gpu(device)
    (x,) = softmax.make_inputs(shape, torch.bfloat16, device)
    prof = gpu_profile(softmax.IMPLS[impl], x)
    assert prof.launches == 1, prof.table()


def test_softmax_manual_launches_several(device, gpu_profile):
    """max, subtract, exp, sum, divide: one kernel each (the reductions may take more)."""
    needs_gpu(device)
    (x,) = softmax.make_inputs((1000, 1001), torch.float32, device)
    prof = gpu_profile(softmax.IMPLS["torch_manual"], x)
    assert prof.launches >= 4, prof.table()
