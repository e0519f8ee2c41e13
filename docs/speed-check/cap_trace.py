"""A pytest plugin for the speed checks: every clock reading of the power cap's longer warm-up
(`CudaTimer._hold_power_cap`), one line each, appended to $GPUPERF_CAP_TRACE: the test, seconds since
the warm-up began, SM clock, whether the cap held it, power drawn as a share of the limit. Load it
with `PYTHONPATH=docs/speed-check pytest -p cap_trace ...`; `python cap_trace.py TRACE RESULTS.json`
replays the settling rules on the readings (when each would have ended, and at what clock); RESULTS may
also be a {test id: MHz} file of the samples' clocks (h200-2026-11-28/ holds two runs' of both)."""
from __future__ import annotations

import json
import os
import sys
import time

_PATH = os.environ.get("GPUPERF_CAP_TRACE")
SAMPLES_S = 0.3  # about how long a loaded call's samples run
_state: dict = {"node": "?", "start": None, "last": None}


def pytest_runtest_logstart(nodeid: str, location) -> None:
    _state["node"] = nodeid


def pytest_configure(config) -> None:
    if not _PATH:
        return
    from pytest_gpuperf.measure import cuda_timer

    hold, read, share = cuda_timer.CudaTimer._hold_power_cap, cuda_timer.read_clocks, cuda_timer.power_share

    def traced_hold(self, seen):
        _state["start"] = time.perf_counter()
        _write(f"hold\t{_state['node']}\t{self.baseline_clock_mhz}\t{int(seen)}")
        try:
            return hold(self, seen)
        finally:
            _state["start"] = None
            _write(f"end\t{_state['node']}\t{int(self.loaded)}")

    def traced_read(index):
        _state["last"] = read(index)
        return _state["last"]

    def traced_share(index):
        value = share(index)
        if _state["start"] is not None and _state["last"] is not None:
            last = _state["last"]
            _write(f"r\t{time.perf_counter() - _state['start']:.4f}\t{last.sm_clock_mhz}\t"
                   f"{int(last.power_limited)}\t{value if value is None else round(value, 3)}")
        return value

    cuda_timer.CudaTimer._hold_power_cap = traced_hold
    cuda_timer.read_clocks, cuda_timer.power_share = traced_read, traced_share


def _write(line: str) -> None:
    with open(_PATH, "a") as out:
        out.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}\t{line}\n")


# ---- replay ------------------------------------------------------------------------------------
def _calls(path: str) -> list[dict]:
    """One dict per warm-up: node, baseline clock, readings [(t, mhz, limited, share)], per worker."""
    open_: dict[str, dict] = {}
    calls = []
    for line in open(path):
        worker, kind, *rest = line.rstrip("\n").split("\t")
        if kind == "hold":
            open_[worker] = {"node": rest[0], "base": None if rest[1] == "None" else int(float(rest[1])),
                             "seen": rest[2] == "1", "readings": []}
        elif kind == "r" and worker in open_:
            t, mhz, limited, share = rest
            open_[worker]["readings"].append((float(t), int(mhz) if mhz != "None" else None, limited == "1",
                                              None if share == "None" else float(share)))
        elif kind == "end" and worker in open_:
            calls.append(open_.pop(worker))
    return calls


def _replay(calls: list[dict], sampled: dict[str, int], rules: dict) -> None:
    from pytest_gpuperf.measure.device import ClockState

    for name, rule in rules.items():
        total, moved = 0.0, []
        for call in calls:
            states = [ClockState(sm_clock_mhz=m, throttle=["sw_power_cap"] if lim else [])
                      for _, m, lim, _ in call["readings"]]
            shares = [s for *_, s in call["readings"]]
            end = len(states) - 1
            for i in range(len(states)):
                if rule(states[: i + 1], shares[: i + 1], call["base"], call["readings"][i][0]):
                    end = i
                    break
            t_end = call["readings"][end][0]
            total += t_end
            at = sampled.get(call["node"])
            # what samples started there would run at: the readings of their first SAMPLES_S, then
            # (past the warm-up's real end) the clock the samples did run at
            window = [m for t, m, *_ in call["readings"][end:] if m and t <= t_end + SAMPLES_S]
            reached = call["readings"][-1][0]
            if at:
                span = min(SAMPLES_S, max(0.0, reached - t_end))
                mean = (span * (sum(window) / len(window) if window else at) + (SAMPLES_S - span) * at) / SAMPLES_S
                moved.append((mean - at) / at)
        big = sum(1 for m in moved if abs(m) > 0.02)
        worst = max(moved, key=abs) if moved else 0.0
        print(f"{name:>28}: {total:6.1f} s over {len(calls)} calls; the clock of the first {SAMPLES_S} s "
              f"after the end more than 2% off the samples' in {big}, at most {worst * 100:+.1f}%")


def _sampled_clocks(path: str) -> dict[str, int]:
    """Test id -> the SM clock its samples ran at, from a results JSON or a {test id: MHz} file."""
    data = json.load(open(path))
    if "benchmarks" not in data:
        return data
    return {b["fullname"]: b["extra_info"].get("sm_clock_mhz") for b in data["benchmarks"]}


def _rule(reads: int, mhz: int, min_s: float):
    """The warm-up's end (cuda_timer._hold_power_cap) with other settling constants."""
    from pytest_gpuperf.measure import power_cap as pc

    def ends(states, shares, base, t) -> bool:
        kept = pc.POWER_CAP_READS, pc.POWER_CAP_SETTLED_MHZ
        pc.POWER_CAP_READS, pc.POWER_CAP_SETTLED_MHZ = reads, mhz
        try:
            return t >= pc.POWER_CAP_WARMUP_S or (t >= min_s and (
                pc.cap_clear(states, shares) or pc.cap_settled(states) or pc.clock_matched(states, base)))
        finally:
            pc.POWER_CAP_READS, pc.POWER_CAP_SETTLED_MHZ = kept
    return ends


def main(trace: str, results: str) -> None:
    from pytest_gpuperf.measure import power_cap as pc

    sampled = _sampled_clocks(results)
    now = (pc.POWER_CAP_READS, pc.POWER_CAP_SETTLED_MHZ, pc.POWER_CAP_MIN_S)
    _replay(_calls(trace), sampled, {
        "as committed": _rule(*now),
        "three readings": _rule(3, now[1], now[2]),
        "45 MHz": _rule(now[0], 45, now[2]),
        "three readings, 45 MHz": _rule(3, 45, now[2]),
        "two readings, from 0.15 s": _rule(2, now[1], 0.15)})


if __name__ == "__main__":
    main(*sys.argv[1:3])
