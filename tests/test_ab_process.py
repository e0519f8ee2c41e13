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

    def interrupt_once_running() -> None:
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the handler is set before the pid is written
        os.kill(os.getpid(), signal.SIGTERM)  # a real signal: it breaks the main thread's wait

    def stop(signum, frame):  # as `gpuperf ab` handles a cancelled CI job
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    threading.Thread(target=interrupt_once_running, daemon=True).start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            ab_process.run_pytest(["-q", "-p", "no:cacheprovider", "test_deaf.py"], pytester.path,
                                  pytester.path / "log")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert time.monotonic() - started < 30
    with pytest.raises(ProcessLookupError):
        os.kill(int(Path(pid_file).read_text()), 0)  # killed and reaped: not even a zombie
    assert not ab_process._LIVE
