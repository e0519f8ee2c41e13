"""kernels/cuda_ext.py: extensions build side by side in the background and load() waits for them.

nvcc is replaced by a stand-in that sleeps, so this runs anywhere in a fraction of a second."""
from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import pytest
import torch

from kernels import cuda_ext


#: The content digest the stand-in `stage` names every source folder with.
DIGEST = "0123456789abcdef"


def _fake_builds(log: list, seconds: float):
    def fake_build(name, sources, extra_cuda_cflags, verbose):
        start = time.perf_counter()
        time.sleep(seconds)
        log.append((name, threading.current_thread().name, start, time.perf_counter()))
        return f"module {name}"
    return (mock.patch.object(cuda_ext, "_builds", {}), mock.patch.object(cuda_ext, "_loaded", {}),
            mock.patch.object(cuda_ext, "_pool", None),
            mock.patch.object(torch.cuda, "is_available", return_value=True),
            mock.patch.object(torch.cuda, "get_device_capability", return_value=(9, 0)),
            mock.patch.object(cuda_ext, "stage", lambda source: Path("/staged", f"{source.stem}-{DIGEST}", source.name)),
            mock.patch("torch.utils.cpp_extension.load", fake_build))


def test_prebuilt_extensions_compile_side_by_side_and_load_waits_for_them():
    log = []
    with ExitStack() as stack:
        for patch in _fake_builds(log, 0.3):
            stack.enter_context(patch)
        cuda_ext.prebuild(["elementwise", "softmax", "matmul"])
        assert cuda_ext.load("matmul") == f"module gpuperf_matmul_sm90a_{DIGEST}"
        assert cuda_ext.load("softmax") == cuda_ext.load("softmax") == f"module gpuperf_softmax_sm90a_{DIGEST}"
        assert cuda_ext.load("elementwise") == f"module gpuperf_elementwise_sm90a_{DIGEST}"
        assert cuda_ext.load("softmax", "-DX") != f"module gpuperf_softmax_sm90a_{DIGEST}"  # own build dir
        cuda_ext.finish_builds()
    first = [entry for entry in log if entry[0].count("_") == 3]
    assert sorted(name for name, *_ in first) == [f"gpuperf_{n}_sm90a_{DIGEST}" for n in ("elementwise", "matmul",
                                                                                          "softmax")]  # each built once
    assert all(thread.startswith("gpuperf-nvcc") for _, thread, *_ in first)
    assert max(start for *_, start, _ in first) < min(end for *_, end in first), "builds did not overlap"


def test_finish_builds_drops_builds_not_started_and_waits_for_running_ones():
    log = []
    with ExitStack() as stack:
        for patch in _fake_builds(log, 0.2):
            stack.enter_context(patch)
        cuda_ext.prebuild([f"ext{i}" for i in range(8)])  # 4 workers: 4 start, 4 wait
        cuda_ext.finish_builds()
        assert len(log) == 4 and len(cuda_ext._builds) == 4  # the 4 that ran stay; the rest are dropped
        assert cuda_ext.load("ext7") == f"module gpuperf_ext7_sm90a_{DIGEST}"  # a dropped one builds again


def test_without_a_gpu_loading_names_the_file():
    # loaded modules set aside: on a GPU machine an earlier test of the session has loaded softmax
    with mock.patch.object(torch.cuda, "is_available", return_value=False), \
            mock.patch.dict(cuda_ext._loaded, clear=True):
        with pytest.raises(cuda_ext.CudaUnavailable, match=r"kernels/cuda/softmax\.cu needs a CUDA device"):
            cuda_ext.load("softmax")


def test_sources_are_staged_by_content_so_two_checkouts_share_one_build(tmp_path, monkeypatch):
    """ninja rebuilds when a source's path changes: the same sources in two checkouts (gpuperf ab's
    base worktree and the working tree) are compiled from one staged copy; an edit gets its own."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    checkouts = [tmp_path / "base", tmp_path / "head"]
    for root in checkouts:
        root.mkdir()
        (root / "k.cu").write_text('#include "common.cuh"\n')
        (root / "common.cuh").write_text("// v1\n")
    base, head = (cuda_ext.stage(root / "k.cu") for root in checkouts)
    assert base == head and base.read_text() == '#include "common.cuh"\n'
    assert (base.parent / "common.cuh").read_text() == "// v1\n"
    (checkouts[1] / "common.cuh").write_text("// v2\n")  # a header edit reaches the build
    edited = cuda_ext.stage(checkouts[1] / "k.cu")
    assert edited.parent != base.parent and (edited.parent / "common.cuh").read_text() == "// v2\n"
    assert cuda_ext.stage(checkouts[0] / "k.cu") == base
    assert base.parent.stat().st_mode & 0o777 == base.parent.parent.stat().st_mode & 0o777  # not mkdtemp's 0700
