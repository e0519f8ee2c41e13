"""The graph node gap's lookup: the opt-out, the per-GPU cache file, and a child that fails (no GPU here:
the child's measurement itself runs in the harness self-checks on a device)."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from pytest_gpuperf.measure import node_gap, node_gap_probe
from pytest_gpuperf.measure.node_gap import NodeGap


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(node_gap.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(node_gap.DISABLE_ENV, raising=False)
    monkeypatch.setattr(node_gap, "_KNOWN", {})
    monkeypatch.setattr(node_gap, "_key", lambda index: f"GPU {index}|driver 1|torch 2|timing 4")
    return tmp_path


@pytest.fixture
def children(monkeypatch):
    """Each child the lookup starts, answered with the next of the given gaps."""
    started: list[int] = []
    answers: list[NodeGap] = []

    def child(index: int) -> NodeGap:
        started.append(index)
        return answers.pop(0)

    monkeypatch.setattr(node_gap, "_measure_in_child", child)
    return started, answers


def test_the_gap_is_measured_once_per_gpu_and_kept_for_later_processes(cache_dir, children, monkeypatch) -> None:
    started, answers = children
    answers += [NodeGap(0.0003, 0.00014, 0.83, "2026-11-24 10:00"), NodeGap(0.0004, 0.0002, 0.8, "2026-11-24 10:01")]
    assert node_gap.lookup(0).for_cache("cold") == 0.0003
    assert node_gap.lookup(0).for_cache("warm") == 0.00014
    monkeypatch.setattr(node_gap, "_KNOWN", {})  # a later process
    assert node_gap.lookup(0) == NodeGap(0.0003, 0.00014, 0.83, "2026-11-24 10:00")
    assert node_gap.lookup(1).cold_ms == 0.0004  # another GPU: its own measurement
    assert started == [0, 1]
    stored = json.loads((cache_dir / "node-gap.json").read_text())
    assert sorted(stored) == ["GPU 0|driver 1|torch 2|timing 4", "GPU 1|driver 1|torch 2|timing 4"]


def test_the_gpus_of_a_host_are_measured_at_once_and_each_once(cache_dir, monkeypatch) -> None:
    """Two GPUs' processes (threads here) measure side by side: each child waits until the other has
    started, which a lock shared by all GPUs would never let happen. A second process of GPU 0 waits for
    the first one's measurement and reads it."""
    import threading

    both = threading.Barrier(2, timeout=10)
    started: list[int] = []

    def child(index: int) -> NodeGap:
        started.append(index)
        if index < 2:
            both.wait()
        return NodeGap(0.0001 * (index + 1), 0.0001)

    monkeypatch.setattr(node_gap, "_measure_in_child", child)
    gaps: dict[int, NodeGap] = {}
    threads = [threading.Thread(target=lambda i=i: gaps.__setitem__(i, node_gap._cached_or_measured(i)))
               for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(started) == [0, 1] and gaps[1].cold_ms == 0.0002
    assert node_gap._cached_or_measured(0).cold_ms == 0.0001 and sorted(started) == [0, 1]
    assert len(json.loads((cache_dir / "node-gap.json").read_text())) == 2


def test_a_failed_measurement_subtracts_nothing_says_why_and_is_not_stored(cache_dir, children, monkeypatch) -> None:
    started, answers = children
    answers += [NodeGap(problem="measuring it failed (RuntimeError: CUPTI unavailable)"), NodeGap(0.0003, 0.0001)]
    gap = node_gap.lookup(0)
    assert (gap.cold_ms, gap.warm_ms) == (0.0, 0.0)
    assert "CUPTI unavailable" in gap.describe()
    assert node_gap.lookup(0) is gap  # not retried within the process
    monkeypatch.setattr(node_gap, "_KNOWN", {})
    assert node_gap.lookup(0).cold_ms == 0.0003  # the next process tries again
    assert started == [0, 0]


def test_an_unreadable_cache_file_is_measured_again_and_rewritten(cache_dir, children) -> None:
    started, answers = children
    (cache_dir / "node-gap.json").write_text("{not json")
    answers.append(NodeGap(0.0003, 0.0001))
    assert node_gap.lookup(0).cold_ms == 0.0003
    assert "GPU 0|driver 1|torch 2|timing 4" in json.loads((cache_dir / "node-gap.json").read_text())


def test_the_environment_turns_the_subtraction_off_without_a_child(cache_dir, children, monkeypatch) -> None:
    monkeypatch.setenv(node_gap.DISABLE_ENV, "0")
    gap = node_gap.lookup(0)
    assert gap.for_cache("cold") == gap.for_cache("warm") == 0.0
    assert "GPUPERF_NODE_GAP=0" in gap.describe()
    assert children[0] == []


@pytest.mark.parametrize("returncode, stdout, stderr, expected", [
    (0, 'noise\n{"cold_ms": 0.0003, "warm_ms": 0.0001, "kernel_us": 0.83, "measured_at": "now"}\n', "",
     NodeGap(0.0003, 0.0001, 0.83, "now")),
    (1, "", "Traceback ...\nRuntimeError: no CUDA GPUs are available\n", "RuntimeError: no CUDA GPUs are available"),
    (0, "not json\n", "", "exited 0: no output"),
])
def test_the_childs_answer_is_read_from_its_last_line(monkeypatch, returncode, stdout, stderr, expected) -> None:
    seen = {}

    def run(cmd, **kwargs):
        seen.update(cmd=cmd)
        return subprocess.CompletedProcess(cmd, returncode, stdout, stderr)

    monkeypatch.setattr(node_gap.subprocess, "run", run)
    gap = node_gap._measure_in_child(2)
    assert seen["cmd"][-3:] == ["-m", "pytest_gpuperf.measure.node_gap_probe", "2"]
    if isinstance(expected, NodeGap):
        assert gap == expected
    else:
        assert expected in gap.problem and (gap.cold_ms, gap.warm_ms) == (0.0, 0.0)


def test_the_child_measures_with_the_subtraction_off(monkeypatch, capsys) -> None:
    """Its own timer must not subtract the gap it is measuring (nor start a child of its own)."""
    monkeypatch.setenv(node_gap.DISABLE_ENV, "1")  # restored after the test: main() sets it
    seen = {}

    def measure(index: int) -> NodeGap:
        seen.update(index=index, env=os.environ.get(node_gap.DISABLE_ENV))
        return NodeGap(0.0003, 0.0001, 0.8, "now")

    monkeypatch.setattr(node_gap_probe, "measure_gap", measure)
    node_gap_probe.main(["1"])
    assert seen == {"index": 1, "env": "0"}
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["cold_ms"] == 0.0003


def test_known_never_measures_and_reads_what_a_lookup_stored(cache_dir, children, monkeypatch) -> None:
    started, answers = children
    assert node_gap.known(0) is None  # nothing yet: no child either
    answers.append(NodeGap(0.0003, 0.00014, 0.83, "2026-11-24 10:00"))
    node_gap.lookup(0)
    monkeypatch.setattr(node_gap, "_KNOWN", {})  # a later process: from the file
    assert node_gap.known(0) == NodeGap(0.0003, 0.00014, 0.83, "2026-11-24 10:00")
    assert node_gap.known(1) is None
    monkeypatch.setenv(node_gap.DISABLE_ENV, "0")
    assert "GPUPERF_NODE_GAP=0" in node_gap.known(1).describe()
    assert started == [0]


#: The processes that time nothing (--collect-only, --fixtures; the controller of `-n 2`) and one that does.
ROLES = {"collect-only": dict(collectonly=True, dist="no", tx=None),
         "fixtures": dict(collectonly=False, showfixtures=True, dist="no", tx=None),
         "xdist controller": dict(collectonly=False, dist="load", tx=["2*popen"]),
         "timing": dict(collectonly=False, dist="no", tx=None)}


def _perf(role: str, **more):
    """A stand-in GpuPerf of a process in `role`, with the methods under test bound to it."""
    from types import SimpleNamespace

    from pytest_gpuperf.plugin.session import GpuPerf

    perf = SimpleNamespace(settings=SimpleNamespace(device_index=1, counter_pass=None), is_worker=False,
                           config=SimpleNamespace(option=SimpleNamespace(**ROLES[role])), **more)
    perf._times_here = lambda: GpuPerf._times_here(perf)
    perf._xdist_controller = lambda: GpuPerf._xdist_controller(perf)
    perf._listing = lambda: GpuPerf._listing(perf)
    return perf


@pytest.mark.parametrize("role", ROLES)
def test_the_session_header_measures_the_gap_only_when_tests_will_be_timed(cache_dir, children, role) -> None:
    from pytest_gpuperf.plugin.session import GpuPerf

    started, answers = children
    answers.append(NodeGap(0.0003, 0.00014, 0.83, "2026-11-24 10:00"))
    line = GpuPerf._node_gap_line(_perf(role), 0)
    if role != "timing":
        assert started == [] and "not measured yet" in line
    else:
        assert started == [0] and "0.30 µs cold" in line


@pytest.mark.parametrize("role", ROLES)
def test_the_gap_is_measured_before_the_session_selects_the_device(cache_dir, children, monkeypatch, role) -> None:
    """A process that started the child after selecting its device read every graph-timed call
    apart from all others (docs/measurement.md); the tests' stream, the timer's own, is made on the
    selected device. --collect-only and xdist's controller (its workers time) measure and make neither."""
    from types import SimpleNamespace

    import torch

    from pytest_gpuperf.plugin import session

    started, answers = children
    answers.append(NodeGap(0.0003, 0.00014, 0.83, "2026-11-24 10:00"))
    order: list[str] = []
    monkeypatch.setattr(session, "has_cuda", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: order.append(f"set_device {index} after {started}"))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    perf = _perf(role, calibration=SimpleNamespace(stream=lambda _torch, index: order.append(f"stream {index}")))
    session.GpuPerf._select_device(perf)
    assert order == (["set_device 1 after []"] if role != "timing" else ["set_device 1 after [1]", "stream 1"])

