"""`gpuperf ab`'s pytest processes (ab_process.py): an interrupted run stops its child's process
group, and kills it when it ignores the stop."""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from pytest_gpuperf import ab_process

pytest_plugins = ["pytester"]

DEAF = """
import os, signal, time

def test_deaf():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as a process stuck in a CUDA call would not end
    open({pid_file!r}, "w").write(str(os.getpid()))
    time.sleep(60)
"""


def test_an_interrupted_run_kills_a_child_that_ignores_the_stop(pytester: pytest.Pytester, monkeypatch) -> None:
    pid_file = pytester.path / "pid"
    pytester.makepyfile(test_deaf=DEAF.format(pid_file=str(pid_file)))
    monkeypatch.setattr(ab_process, "STOP_GRACE_S", 0.5)
    returned = threading.Event()

    def interrupt_once_running() -> None:
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline and not returned.is_set():
            time.sleep(0.05)
        time.sleep(0.2)  # the child ignores SIGTERM from before it writes the pid
        if not returned.is_set():  # never at this process once run_pytest is over
            os.kill(os.getpid(), signal.SIGTERM)  # a real signal: it breaks the main thread's wait

    def stop(signum, frame):  # as `gpuperf ab` handles a cancelled CI job
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    interrupter = threading.Thread(target=interrupt_once_running, daemon=True)
    interrupter.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            ab_process.run_pytest(["-q", "-p", "no:cacheprovider", "test_deaf.py"], pytester.path,
                                  pytester.path / "log")
    finally:
        returned.set()
        interrupter.join()
        signal.signal(signal.SIGTERM, previous)
    assert time.monotonic() - started < 30
    with pytest.raises(ProcessLookupError):
        os.kill(int(Path(pid_file).read_text()), 0)  # killed and reaped: not even a zombie
    assert not ab_process._LIVE


LEAVES_A_WORKER = """
import os, signal, subprocess, sys, time

def test_with_a_worker():
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    worker = subprocess.Popen([sys.executable, "-c", code])  # its group: as an xdist worker's
    time.sleep(0.5)  # its SIGTERM handler is set
    open({pid_file!r}, "w").write(str(worker.pid))
    time.sleep(60)
"""


def _alive(pid: int) -> bool:
    """Running, not a zombie that nobody has reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_a_group_stopped_from_another_thread_is_killed_whole_once_its_pytest_ends(pytester: pytest.Pytester) -> None:
    """On several GPUs the main thread stops the children (`stop_children`) while other threads wait
    on them: pytest ends on SIGTERM, and what it left of its group (a worker in a CUDA call) is killed."""
    pid_file = pytester.path / "pid"
    pytester.makepyfile(test_worker=LEAVES_A_WORKER.format(pid_file=str(pid_file)))
    status: list[int] = []
    runner = threading.Thread(target=lambda: status.append(ab_process.run_pytest(
        ["-q", "-p", "no:cacheprovider", "test_worker.py"], pytester.path, pytester.path / "log")))
    runner.start()
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    worker = int(pid_file.read_text())
    ab_process.stop_children()
    runner.join(timeout=30)
    assert status == [-signal.SIGTERM]
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker) and not ab_process._LIVE and not ab_process._STOPPED
