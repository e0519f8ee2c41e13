"""Where a session's time went outside its measurements, from pytest's test reports: each process's
time before its first test (its start, collection, collection hooks such as a suite's precompile, the
graph node gap's measurement, a counting pass), the tests' own work (their setup, body and teardown
less their measurements: inputs, references, checks, and the harness's work around a measurement,
such as a peak measured on first use), the time after each process's last test (waiting for the other
workers, and pytest-xdist's shutdown of them; a worker that ran no test waits all along), and the rest,
between tests (pytest's own hooks and reporting)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .records import nodeid_name

#: The outside-measurements breakdown names this many test functions whose own work took longest.
HEAVIEST_SHOWN = 3


@dataclass
class ProcessSpan:
    """The tests one process ran: when its first started and its last ended (the reports' epoch
    times)."""

    first_start: float
    last_stop: float
    last_test: str = ""  # the test whose report ended last


@dataclass(frozen=True)
class Outside:
    """A session's time outside measurements, summed over its processes (pytest-xdist's workers)."""

    total_s: float
    before_first_test_s: float
    own_work_s: float
    after_last_test_s: float
    between_tests_s: float
    #: (test function, seconds of own work), largest first
    heaviest: tuple[tuple[str, float], ...]
    #: with several processes: how far apart their last tests ended, and the test that ended last
    #: (test id, its seconds in setup, call and teardown): what a better order of the tests could save
    ends_apart_s: float = 0.0
    last_test: tuple[str, float] | None = None


@dataclass
class Timeline:
    """Test reports' phases, per process and per test, as the session's (or xdist controller's)
    pytest_runtest_logreport sees them."""

    processes: dict[str, ProcessSpan] = field(default_factory=dict)
    #: test id -> seconds in its setup, call and teardown
    test_s: dict[str, float] = field(default_factory=dict)

    def add(self, process: str, nodeid: str, start: float, stop: float, duration: float) -> None:
        """One phase (setup, call or teardown) of a test, run by `process`, from `start` to `stop`. A
        report without real times (xdist's stand-in for the test a crashed worker was running reads
        0 and 0) counts nowhere."""
        if not 0 < start <= stop:
            return
        span = self.processes.get(process)
        if span is None:
            self.processes[process] = ProcessSpan(start, stop, nodeid)
        else:
            if stop >= span.last_stop:
                span.last_stop, span.last_test = stop, nodeid
            span.first_start = min(span.first_start, start)
        self.test_s[nodeid] = self.test_s.get(nodeid, 0.0) + max(duration, 0.0)

    def outside(self, started: float, ended: float, workers: int, measured: Mapping[str, float]) -> Outside | None:
        """The session from `started` to `ended` (epoch seconds) in each of `workers` processes (0 or 1
        without xdist), of which `measured` (test id -> measuring seconds) was measuring; None when
        no test reported its start and end. A worker restarted after a crash reports under a new id:
        its spans count, the process count stays `workers`."""
        if not self.processes:
            return None
        processes = max(workers, 1)
        span = max(ended - started, 0.0)

        def clipped(t: float) -> float:
            return min(max(t, started), ended)

        before = sum(clipped(p.first_start) - started for p in self.processes.values())
        idle = max(processes - len(self.processes), 0) * span  # workers that ran no test
        after = idle + sum(ended - clipped(p.last_stop) for p in self.processes.values())
        own: dict[str, float] = {}
        for nodeid, seconds in self.test_s.items():
            name = nodeid_name(nodeid)
            own[name] = own.get(name, 0.0) + max(seconds - measured.get(nodeid, 0.0), 0.0)
        heaviest = sorted(((name, s) for name, s in own.items() if s > 0), key=lambda x: (-x[1], x[0]))
        total = max(span * processes - sum(measured.values()), 0.0)
        own_s = sum(own.values())
        ends = sorted(self.processes.values(), key=lambda p: p.last_stop)
        apart, last = 0.0, None
        if processes > 1 and ends:
            apart = clipped(ends[-1].last_stop) - (clipped(ends[0].last_stop) if len(ends) == processes else started)
            last = (ends[-1].last_test, self.test_s.get(ends[-1].last_test, 0.0))
        return Outside(total_s=total, before_first_test_s=before, own_work_s=own_s, after_last_test_s=after,
                       between_tests_s=max(total - before - after - own_s, 0.0),
                       heaviest=tuple(heaviest[:HEAVIEST_SHOWN]), ends_apart_s=apart, last_test=last)
