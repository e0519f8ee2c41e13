"""Matrix multiply C = A @ B: every impl of kernels/matmul.py by precision and shape (M x N x K).

Precisions: bfloat16, float16, float32 (full fp32 arithmetic) and tf32 (fp32 tensors, TF32
multiplies allowed: only for torch, compiled and triton; the other impls skip it with a reason).
Shapes: 512..8192 square; 4097x4095x1023 (odd sizes: every edge is a partial tile, and the
unaligned strides send Triton to its pointer kernel); 16384x16384x64 (C-write bound) and
64x16384x16384 (one tile-row, B-read bound); two small shapes that the CPU interpreter can run
(96x80x64 takes Triton's TMA path with partial tiles, TF32 in its swapped C^T = B^T A^T form; 67x45x33
its pointer path).

Kept out to hold the GPU suite to its time budget (each is the same call as a case that runs):
- compiled: only 512, 4096 and 8192 (and the small shapes). It is the same cuBLAS call as
  torch behind torch.compile's guards (kernels/matmul.py explains; test_compiled_lowers_to_cublas
  checks), so other shapes add time, not information.
- torch_manual: skipped, with the size, wherever its M x K x N fp32 temporary would exceed
  1 GiB (everything from 1024 up); it is the readable definition, not a contender.
- cuda (SIMT) runs fp32 at every shape, 8192 included (~45 ms a call).
Tolerances come from kernels.matmul.tolerance(precision, K): they scale with sqrt(K), see there.
On CPU (no CUDA) the torch impls run at sizes up to 1024 and Triton under TRITON_INTERPRET=1 at
the small shapes only (conftest.require).
"""
from __future__ import annotations

import pytest
import torch
from conftest import HAS_CUDA, require

from kernels import matmul, matmul_configs, matmul_triton

CUDA_EXTENSIONS = ("matmul",)  # kernels/cuda/matmul.cu, built in the background from the start (conftest)

PRECISIONS = ["bfloat16", "float16", "float32", "tf32"]
SQUARE = [(n, n, n) for n in (512, 1024, 2048, 4096, 8192)]
AWKWARD = (4097, 4095, 1023)
TALL_SKINNY = [(16384, 16384, 64), (64, 16384, 16384)]
SMALL = [(96, 80, 64), (67, 45, 33)]
SHAPES = SMALL + SQUARE + [AWKWARD] + TALL_SKINNY
COMPILED_SHAPES = SMALL + [(512, 512, 512), (4096, 4096, 4096), (8192, 8192, 8192)]
SMOKE = {("triton", "bfloat16", (96, 80, 64)), ("triton", "float32", (67, 45, 33)),  # the interpreter's
         ("triton", "float32", AWKWARD)}  # the GPU's: it decides 5% (spread 0.3%, not power-capped)


def _shape_id(shape: tuple[int, int, int]) -> str:
    return "x".join(map(str, shape))


# Not timed on the GPU: 1024 and 2048 (between 512 and 4096, they add minutes of autotuning and no
# information) and the interpreter's small shapes; cases that would only skip are not generated.
GPU_SHAPES = [(512, 512, 512), (4096, 4096, 4096), (8192, 8192, 8192), AWKWARD] + TALL_SKINNY


def _cases():
    for impl in matmul.IMPLS:
        for precision in PRECISIONS:
            for shape in SHAPES:
                if impl == "compiled" and shape not in COMPILED_SHAPES:
                    continue
                if HAS_CUDA and (shape not in GPU_SHAPES or _skip_reason(impl, precision, shape)):
                    continue
                marks = [pytest.mark.smoke] if (impl, precision, shape) in SMOKE else []
                yield pytest.param(impl, precision, shape, marks=marks,
                                   id=f"{impl}-{precision}-{_shape_id(shape)}")


def _skip_reason(impl: str, precision: str, shape: tuple[int, int, int]) -> str | None:
    if matmul.is_tf32(precision) and impl not in matmul.TF32_IMPLS:
        return f"{impl} has no TF32 mode (its float32 case computes in full fp32)"
    if impl == "cuda" and precision != "float32":
        return "the CUDA C++ kernel is a SIMT fp32 SGEMM; other dtypes are the tensor-core impls' job"
    if impl == "torch_manual" and matmul.manual_bytes(shape) > matmul.MANUAL_MAX_BYTES:
        need = matmul.manual_bytes(shape) / 2**30
        return f"torch_manual would materialize a {need:.1f} GiB M x K x N fp32 temporary (limit 1 GiB)"
    return None


def _numel(shape: tuple[int, int, int]) -> int:
    m, n, k = shape
    return max(m * k, k * n, m * n)


@pytest.mark.parametrize("impl,precision,shape", list(_cases()))
def test_matmul(impl, precision, shape, device, gpu_benchmark, gpu_assert_close):
    reason = _skip_reason(impl, precision, shape)
    if reason:
        pytest.skip(reason)
    require(impl, _numel(shape))
    a, b = matmul.make_inputs(shape, precision, device)
    nbytes, flops = matmul.cost(shape, precision)
    tf32 = matmul.is_tf32(precision)
    # The flag around the measurement (the impls set their own inside the call) lets the harness
    # rate a tf32 case against the TF32 matmul peak rather than the fp32 one.
    with matmul.tf32_allowed(tf32):
        out = gpu_benchmark(matmul.IMPLS[impl], a, b, tf32=tf32, bytes=nbytes, flops=flops)
    # Error grows ~sqrt(K) (TF32 operand rounding, fp32 accumulation): tolerance() derives both terms.
    rtol, atol = matmul.tolerance(precision, shape[2])
    gpu_assert_close(out, matmul.reference(a, b), rtol=rtol, atol=atol)


# ---- every Triton config, forced, at shapes with partial tiles ----------------------------------
# The autotuner times configs but never checks them; a config that computes garbage would pass
# unnoticed until it wins on some shape. Each table entry runs here once. On the GPU these reuse
# the binaries autotuning compiled for the same specialization; on CPU they run interpreted.
TMA_SHAPE = (160, 272, 96)  # aligned strides: TMA path; partial M, N and K tiles
PTR_SHAPE = (67, 45, 33)  # odd strides: pointer path
SMALL_M_SHAPE = (40, 272, 96)  # M <= 64: the 64-row configs' home


def _config_cases():
    for (width, precision), table in matmul_configs.TMA_TABLE.items():
        prec = {("16", "ieee"): "bfloat16", ("fp32", "tf32"): "tf32", ("fp32", "tf32-swap"): "tf32",
                ("fp32", "ieee"): "float32"}[(width, precision)]
        for values in table:
            cfg = dict(zip(matmul_configs.TMA_FIELDS, values), GROUP_M=8)
            shape = SMALL_M_SHAPE if cfg["BLOCK_M"] == 64 else TMA_SHAPE
            name = "tma-{}x{}x{}-s{}-w{}-split{}".format(*values[:6]) + ("-ws" if cfg["WARP_SPECIALIZE"] else "")
            # TF32 at these small M: a row-major B takes the swapped form (its own table), a K-major
            # B the B_T one.
            if precision != "tf32":
                yield pytest.param(prec, shape, cfg, False, id=f"{prec}-{name}" + ("-swap" if precision == "tf32-swap" else ""))
            if precision != "tf32-swap":
                yield pytest.param(prec, shape, cfg, True, id=f"{prec}-{name}-kmajor")
    for values in matmul_configs.EXPERIMENTAL_WS_CONFIGS:
        cfg = dict(zip(matmul_configs.TMA_FIELDS, values), GROUP_M=8)
        name = "tma-{}x{}x{}-s{}-w{}-split{}-ws".format(*values[:6])
        yield pytest.param("float16", TMA_SHAPE, cfg, False, id=f"float16-{name}")
    for (width, precision), table in matmul_configs.PTR_TABLE.items():
        prec = {("16", "ieee"): "float16", ("fp32", "tf32"): "tf32", ("fp32", "ieee"): "float32"}[(width, precision)]
        for values in table:
            cfg = dict(zip(matmul_configs.PTR_FIELDS, values), GROUP_M=8)
            yield pytest.param(prec, PTR_SHAPE, cfg, False, id=f"{prec}-ptr-" + "{}x{}x{}-s{}-w{}".format(*values))


@pytest.mark.parametrize("precision,shape,config,k_major", list(_config_cases()))
def test_triton_config(precision, shape, config, k_major, device, gpu_assert_close):
    """k_major: B as the transpose of a row-major N x K tensor, read through a B^T descriptor."""
    require("triton", _numel(shape))
    if HAS_CUDA and config.get("WARP_SPECIALIZE"):
        pytest.skip("experimental warp-specialized config: a device run hung with it in the autotune "
                    "list (kernels/matmul.py EXPERIMENTAL_WS_CONFIGS); checked under the interpreter only")
    a, b = matmul.make_inputs(shape, precision, device, seed=1)
    if k_major:
        b = b.t().contiguous().t()
    tma_config, tf32 = "EPILOGUE_SPLIT" in config, matmul.is_tf32(precision)
    if tma_config and not matmul_triton.uses_tma(a, b, tf32=tf32):
        pytest.skip("no TMA path here (pre-Hopper GPU, or MATMUL_TRITON_TMA=0)")
    assert matmul_triton.uses_tma(a, b, tf32=tf32) == tma_config, "shape does not reach the config's kernel"
    if tma_config and tf32:  # a row-major B at this M is the swapped form's, a K-major one the B^T form's
        assert matmul_triton.b_operand(b, True, shape[0])[1] == k_major
    out = matmul_triton.triton_matmul(a, b, tf32=tf32, config=config)
    rtol, atol = matmul.tolerance(precision, shape[2])
    gpu_assert_close(out, matmul.reference(a, b), rtol=rtol, atol=atol)


def test_tf32_row_major_b_through_the_transposed_copy(device, monkeypatch, gpu_assert_close):
    """The B^T copy a large M takes (TF32_TRANSPOSE_MIN_M), at a small M so the CPU interpreter can run it."""
    require("triton", 96 * 80)
    monkeypatch.setattr(matmul_triton, "TF32_TRANSPOSE_MIN_M", 64)
    a, b = matmul.make_inputs((96, 80, 64), "tf32", device, seed=4)
    if not matmul_triton.uses_tma(a, b, tf32=True):
        pytest.skip("no TMA path here (pre-Hopper GPU, or MATMUL_TRITON_TMA=0)")
    assert matmul_triton.b_operand(b, True, a.shape[0])[1], "a row-major B at M >= TF32_TRANSPOSE_MIN_M is copied to B^T"
    out = matmul_triton.triton_matmul(a, b, tf32=True)
    rtol, atol = matmul.tolerance("tf32", a.shape[1])
    gpu_assert_close(out, matmul.reference(a, b), rtol=rtol, atol=atol)


def test_transposed_copy_of_b(device):
    """matmul_triton.transposed, the B^T copy TF32 takes at large M: partial tiles and a row stride past
    the row length."""
    require("triton", 200 * 130)
    if not (HAS_CUDA or matmul_triton._INTERPRET):
        pytest.skip("the Triton copy runs on a GPU or under TRITON_INTERPRET=1 (elsewhere it is torch's)")
    for shape in ((64, 96), (65, 33), (1, 7), (200, 130)):
        b = torch.randn(*shape, device=device)
        t = matmul_triton.transposed(b)
        assert t.is_contiguous() and torch.equal(t, b.t()), shape
    rows = torch.randn(70, 50, device=device)[:, :40]
    assert torch.equal(matmul_triton.transposed(rows), rows.t())


@pytest.mark.parametrize("precision", ["float16", "tf32"])
def test_triton_strided_operands(precision, device, gpu_assert_close):
    """Views: a column slice of A (row stride 128, still TMA-able) and B as the transpose of a
    row-major N x K tensor (an nn.Linear weight): K-major, read as it is through a B^T descriptor."""
    require("triton", 96 * 128)
    dtype = "float32" if precision == "tf32" else precision
    a_full, _ = matmul.make_inputs((80, 1, 128), dtype, device, seed=2)
    w, _ = matmul.make_inputs((96, 1, 64), dtype, device, seed=3)
    a = a_full[:, 8:72]  # (80, 64)
    b = w.t()  # (64, 96), strides (1, 64)
    tf32 = matmul.is_tf32(precision)
    assert not a.is_contiguous() and not b.is_contiguous()
    b_tensor, b_t = matmul_triton.b_operand(b, tf32, a.shape[0])
    assert b_t and b_tensor.data_ptr() == w.data_ptr(), "a K-major B is not copied"
    out = matmul_triton.triton_matmul(a, b, tf32=tf32)
    rtol, atol = matmul.tolerance(precision, a.shape[1])
    gpu_assert_close(out, matmul.reference(a, b), rtol=rtol, atol=atol)


def test_tf32_reads_b_k_major_when_m_amortizes_the_copy():
    """TF32 with a row-major B goes through a transposed copy (wgmma reads TF32 K-major only) when
    M is large enough to pay for it; a smaller M reads B as it is (the swapped form); 16-bit and
    fp32 never copy."""
    b = torch.zeros(64, 96)
    b_tensor, b_t = matmul_triton.b_operand(b, tf32=True, m=matmul_triton.TF32_TRANSPOSE_MIN_M)
    assert b_t and b_tensor.shape == (96, 64) and b_tensor.is_contiguous()
    assert matmul_triton.b_operand(b, tf32=True, m=64) == (b, False)
    assert matmul_triton.b_operand(b, tf32=False, m=4096) == (b, False)
    if matmul_triton._tma_capable(b.device):  # both take the TMA kernel: the swapped form, and the B^T copy
        assert matmul_triton.uses_tma(torch.zeros(64, 64), b, tf32=True)
        assert matmul_triton.uses_tma(torch.zeros(matmul_triton.TF32_TRANSPOSE_MIN_M, 64), b, tf32=True)


# ---- what runs on the device --------------------------------------------------------------------
def test_triton_is_one_kernel(device, gpu_profile):
    """bf16 4096: one Triton launch (no cast/copy/transposition kernels around it)."""
    a, b = matmul.make_inputs((4096, 4096, 4096), "bfloat16", device)
    prof = gpu_profile(matmul_triton.triton_matmul, a, b)
    assert prof.launches == 1, prof.table()
    assert prof.find("matmul_(tma|ptr)_kernel"), prof.table()


def test_compiled_lowers_to_cublas(device, gpu_profile):
    """Plain torch.compile of a matmul generates no kernel of its own: one cuBLAS launch."""
    a, b = matmul.make_inputs((4096, 4096, 4096), "bfloat16", device)
    prof = gpu_profile(matmul.IMPLS["compiled"], a, b)
    assert prof.launches == 1, prof.table()
    assert not prof.find("triton"), prof.table()


def test_precompile_records_every_autotune_config_and_times_none(device):
    """kernels/precompile.py: under recording, an autotuned launch lists one specialization per
    config its pruner keeps, times none of them (nothing enters the autotuner's cache), and the
    workers compile every one of them."""
    if not HAS_CUDA:
        pytest.skip("compiles for the GPU: CUDA only")
    from kernels import precompile

    shape = (4096, 4096, 2048)  # a shape no other case autotunes in this process
    a, b = matmul.make_inputs(shape, "bfloat16", device)
    assert matmul_triton.uses_tma(a, b, tf32=False)
    # Earlier cases compiled these specializations (they depend on dtypes, alignments and block
    # sizes, not on M, N, K), and a launch Triton finds in its in-memory cache never reaches the
    # hook; with that cache set aside, the launch is as the suite's first one.
    kernel = matmul_triton._matmul_tma_kernel
    compiled = dict(kernel.device_caches)
    kernel.device_caches.clear()
    try:
        with precompile.recording() as specs:
            matmul_triton.triton_matmul(a, b)
    finally:
        kernel.device_caches.clear()
        kernel.device_caches.update(compiled)
    configs = [v for v in matmul_configs.TMA_TABLE[("16", "ieee")] if v[0] != 64]  # M > 64: 128-row tiles
    assert set(specs.values()) == {("kernels.matmul_triton", "_matmul_tma_kernel")}
    assert len(specs) == len(configs)
    assert not [key for key in matmul_triton._tma_tuned.cache if tuple(key[:3]) == shape]
    done = precompile.compile_all(specs)
    assert done.failed == 0 and done.compiled + done.earlier == len(specs)
