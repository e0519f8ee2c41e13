"""kernels/cuda_ext.py: extensions build side by side in the background and load() waits for them.

nvcc is replaced by a stand-in that sleeps, so this runs anywhere in a fraction of a second."""
from __future__ import annotations

import threading
import time
from unittest import mock

import pytest
import torch

from kernels import cuda_ext


def test_prebuilt_extensions_compile_side_by_side_and_load_waits_for_them():
    builds = []

    def fake_build(name, sources, extra_cuda_cflags, verbose):
        builds.append((name, threading.current_thread().name))
        time.sleep(0.3)
        return f"module {name}"

    with mock.patch.object(cuda_ext, "_builds", {}), mock.patch.object(cuda_ext, "_pool", None), \
            mock.patch.object(torch.cuda, "is_available", return_value=True), \
            mock.patch.object(torch.cuda, "get_device_capability", return_value=(9, 0)), \
            mock.patch("torch.utils.cpp_extension.load", fake_build):
        started = time.perf_counter()
        cuda_ext.prebuild(["elementwise", "softmax", "matmul"])
        assert cuda_ext.load("matmul") == "module gpuperf_matmul_sm90a"
        assert cuda_ext.load("softmax") == cuda_ext.load("softmax") == "module gpuperf_softmax_sm90a"
        assert cuda_ext.load("elementwise") == "module gpuperf_elementwise_sm90a"
        elapsed = time.perf_counter() - started
    assert sorted(name for name, _ in builds) == ["gpuperf_elementwise_sm90a", "gpuperf_matmul_sm90a",
                                                  "gpuperf_softmax_sm90a"]  # each built once
    assert all(thread.startswith("gpuperf-nvcc") for _, thread in builds)
    assert elapsed < 0.75, f"three 0.3 s builds took {elapsed:.2f} s: not side by side"


def test_without_a_gpu_loading_names_the_file():
    with mock.patch.object(torch.cuda, "is_available", return_value=False):
        with pytest.raises(cuda_ext.CudaUnavailable, match=r"kernels/cuda/softmax\.cu needs a CUDA device"):
            cuda_ext.load("softmax")
