"""Every kernels/<name>.py provides kernels.common.KernelModule: inputs, a float64 reference, a cost
model and IMPLS, with the calling conventions the bundled suite (perf_tests/) relies on."""
from __future__ import annotations

import importlib
import inspect

import pytest
import torch

from kernels.common import KERNEL_MODULES, KernelModule

#: A small CPU case per kernel: (shape, dtype, expected output shape).
CASES = {
    "elu": ((4, 8), torch.float32, (4, 8)),
    "gelu": ((4, 8), torch.float32, (4, 8)),
    "softmax": ((4, 8), torch.float32, (4, 8)),
    "matmul": ((4, 8, 16), torch.float32, (4, 8)),  # (M, N, K) -> C is M x N
    "flash_attention": ((1, 2, 8, 16), torch.float32, (1, 2, 8, 16)),  # (B, H, N, D)
}


def test_every_kernel_module_has_a_case():
    assert set(CASES) == set(KERNEL_MODULES)


@pytest.fixture(params=KERNEL_MODULES)
def kernel(request):
    return request.param, importlib.import_module(f"kernels.{request.param}")


def test_module_satisfies_the_protocol(kernel):
    name, module = kernel
    assert isinstance(module, KernelModule), f"kernels/{name}.py lacks part of KernelModule"
    params = list(inspect.signature(module.make_inputs).parameters)
    assert params[:4] == ["shape", "dtype", "device", "seed"], f"kernels/{name}.py make_inputs{params}"
    assert list(inspect.signature(module.cost).parameters)[:2] == ["shape", "dtype"]


def test_impls_are_named_callables(kernel):
    name, module = kernel
    assert module.IMPLS and "torch_manual" in module.IMPLS and "compiled" in module.IMPLS
    for impl, fn in module.IMPLS.items():
        assert isinstance(impl, str) and impl.isidentifier() and callable(fn), f"{name}: {impl!r}"


def test_inputs_reference_and_cost_agree(kernel):
    name, module = kernel
    shape, dtype, out_shape = CASES[name]
    inputs = module.make_inputs(shape, dtype, "cpu", seed=3)
    assert isinstance(inputs, tuple) and all(isinstance(t, torch.Tensor) and t.dtype == dtype for t in inputs)
    again = module.make_inputs(shape, dtype, "cpu", seed=3)
    assert all(torch.equal(a, b) for a, b in zip(inputs, again)), f"{name}: make_inputs is not seeded"
    expected = module.reference(*inputs)
    assert expected.dtype == torch.float64 and tuple(expected.shape) == out_shape
    nbytes, flops = module.cost(shape, dtype)
    assert isinstance(nbytes, int) and isinstance(flops, int) and nbytes > 0 and flops > 0
    # the minimum traffic is at least the inputs read once and the output written once
    assert nbytes >= sum(t.nbytes for t in inputs) + expected.numel() * dtype.itemsize


def test_torch_manual_matches_the_reference(kernel):
    """The plain-PyTorch implementation runs on a CPU and agrees with the float64 reference."""
    name, module = kernel
    shape, dtype, _ = CASES[name]
    inputs = module.make_inputs(shape, dtype, "cpu")
    torch.testing.assert_close(module.IMPLS["torch_manual"](*inputs).double(), module.reference(*inputs),
                               rtol=1e-4, atol=1e-5)
