"""The pytest processes of `gpuperf ab`: starting one in a process group of its own, stopping the
ones still running, and reading what its log says (exit statuses, failed tests)."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from .core.child import pytest_command

#: pytest exit codes that still leave results to judge: all passed, some tests failed.
PYTEST_RAN = (0, 1)
PYTEST_USAGE_ERROR, PYTEST_NO_TESTS = 4, 5
#: (pytest arguments, directory, log file[, env=variables to set]) -> pytest's exit status.
Runner = Callable[..., int]
#: Seconds a stopped pytest process group has to end before it is killed: one stuck in a CUDA call,
#: or ignoring SIGTERM, must not hold back the report (GitHub Actions kills a cancelled job 10 s on).
STOP_GRACE_S = 5.0
#: The process groups of the pytest processes running now (`stop_children`), and those it stopped.
_LIVE: set[int] = set()
_STOPPED: set[int] = set()
_LIVE_LOCK = threading.Lock()


def run_pytest(args: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> int:
    """One pytest process in a process group of its own, its output in `log`; returns its exit status.
    `env`: variables set for it (CUDA_VISIBLE_DEVICES, on several GPUs). Interrupted, the whole group
    is stopped, so no pytest keeps the GPU after `gpuperf ab` ends."""
    with open(log, "w", encoding="utf-8") as out:
        proc = _started(pytest_command(args), cwd, out, {**os.environ, **env} if env else None)
        try:
            return proc.wait()
        except BaseException:
            _end(proc)
            raise
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(proc.pid)
                stopped = proc.pid in _STOPPED
                _STOPPED.discard(proc.pid)
            if stopped:  # by `stop_children`: what of its group outlived it (a worker in a CUDA call) goes too
                _signal_group(proc.pid, signal.SIGKILL)


def _started(command: list[str], cwd: Path, out: IO[str], env: dict[str, str] | None) -> subprocess.Popen:
    """The process, started and entered in _LIVE by a helper thread: an interrupt, which only the main
    thread takes, cannot then fall between the fork and the entry and leave a pytest running."""
    box: list = []
    done = threading.Event()

    def start() -> None:
        try:
            proc = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                    env=env)
            with _LIVE_LOCK:
                _LIVE.add(proc.pid)
            box.append(proc)
        except BaseException as exc:  # noqa: BLE001 - raised in the calling thread
            box.append(exc)
        finally:
            done.set()

    threading.Thread(target=start, daemon=True).start()
    try:
        done.wait()
    except BaseException:
        _uninterrupted(done.wait)
        if isinstance(box[0], subprocess.Popen):
            _end(box[0])
            with _LIVE_LOCK:
                _LIVE.discard(box[0].pid)
        raise
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def _end(proc: subprocess.Popen) -> None:
    """Stop an interrupted process's group: SIGTERM, then SIGKILL for what is left of the group after
    STOP_GRACE_S, or at once on a second interrupt (a CI's cancel sends SIGINT, then SIGTERM)."""
    _signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired, KeyboardInterrupt):
        proc.wait(timeout=STOP_GRACE_S)
    _signal_group(proc.pid, signal.SIGKILL)
    _uninterrupted(proc.wait)


def _uninterrupted(wait: Callable[[], object]) -> None:
    """`wait()` to the end, through further interrupts: the cleanup they would cut short is theirs too."""
    while True:
        try:
            wait()
            return
        except KeyboardInterrupt:
            continue


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def stop_children(sig: signal.Signals = signal.SIGTERM) -> None:
    """Send `sig` to every pytest process group `run_pytest` is waiting on (an interrupt that reached
    another thread than the ones waiting; SIGKILL once STOP_GRACE_S has passed). Each such group is
    killed whole once its pytest has ended."""
    with _LIVE_LOCK:
        for pid in _LIVE:
            _signal_group(pid, sig)
            _STOPPED.add(pid)


def failed_count(log: Path) -> int:
    """How many tests pytest's last summary line says failed or errored (1 when it does not say)."""
    lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    counts = [int(n) for n, _ in re.findall(r"(\d+) (failed|errors?)\b", lines[-1])] if lines else []
    return sum(counts) or 1


def failed_tests(log: Path) -> list[str]:
    """The test ids of the lines of pytest's short test summary (`FAILED id - reason`, `ERROR id`);
    lines before its header (a test's captured output) do not count."""
    text = log.read_text(encoding="utf-8", errors="replace")
    _, header, summary = text.rpartition("short test summary info")
    return re.findall(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", summary, flags=re.MULTILINE) if header else []


def only_in_head(status: int, log: Path) -> bool:
    """Did the base's pytest stop because the tests asked for do not exist in that revision?"""
    if status == PYTEST_NO_TESTS:
        return True
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    return status == PYTEST_USAGE_ERROR and "file or directory not found" in text
