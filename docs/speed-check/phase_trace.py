"""A pytest plugin for the speed checks: when each process (the controller, each xdist worker) starts,
configures, collects, runs its first and last test, finishes its session, begins and ends its exit
handlers; one line per event, epoch seconds, appended to $GPUPERF_TRACE. Load it with
`PYTHONPATH=docs/speed-check pytest -p phase_trace ...`; summarize with `python phase_trace.py FILE`."""
from __future__ import annotations

import atexit
import os
import sys
import time

import pytest

_PATH = os.environ.get("GPUPERF_TRACE")
_seen: dict[str, float] = {}


def _role(config: pytest.Config | None = None) -> str:
    given = getattr(config, "workerinput", None) if config is not None else None
    return str(given["workerid"]) if given else os.environ.get("PYTEST_XDIST_WORKER", "controller")


def _started() -> float:
    """This process's start, epoch seconds, from /proc (Linux)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


def _log(event: str, role: str | None = None) -> None:
    if _PATH:
        with open(_PATH, "a") as out:
            out.write(f"{role or _role()} {os.getpid()} {event} {time.time():.3f}\n")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    role = _role(config)
    if _PATH:
        with open(_PATH, "a") as out:
            out.write(f"{role} {os.getpid()} start {_started():.3f}\n")
    _log("configure", role)
    # registered early, so it runs among the last: after it only those registered before it, such as
    # pytest-gpuperf's end of a worker without the interpreter's teardown (plugin/workers.py)
    atexit.register(_log, "exit-handlers-end", role)


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    _log("collection", _role(session.config))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    _log("collected", _role(session.config))


def pytest_runtest_logstart(nodeid: str, location) -> None:
    if "first-test" not in _seen:
        _seen["first-test"] = time.time()
        _log("first-test")


def pytest_runtest_logfinish(nodeid: str, location) -> None:
    _seen["last-test"] = time.time()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session):
    role = _role(session.config)
    if "last-test" in _seen and role != "controller":
        _log(f"last-test-was {_seen['last-test']:.3f}", role)
    _log("sessionfinish", role)
    yield
    _log("sessionfinish-end", role)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    role = _role(config)
    _log("unconfigure", role)
    atexit.register(_log, "exit-handlers-begin", role)  # registered last: runs first


def _summary(path: str) -> None:
    """Per process, seconds from its start to each event."""
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for line in open(path):
        role, pid, event, *rest = line.split()
        value = float(rest[-1])
        if event == "last-test-was":
            event = "last-test"
        rows.setdefault((role, pid), {})[event] = value
    t0 = min(r.get("start", min(r.values())) for r in rows.values())
    for (role, pid), events in sorted(rows.items(), key=lambda kv: min(kv[1].values())):
        print(f"{role:>10} {pid:>7} " + "  ".join(f"{e} {v - t0:.2f}" for e, v in sorted(events.items(), key=lambda kv: kv[1])))


if __name__ == "__main__":
    _summary(sys.argv[1])
