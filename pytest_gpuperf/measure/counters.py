"""Hardware counters through Nsight Compute: a second pytest process under `ncu` counts each
`gpu_benchmark` call once, in its own NVTX range, before the timing run (counters replay kernels,
so they never run while time is measured). docs/counters.md says why ncu and what it costs.

The counting process (`--gpuperf-counter-pass`) warms each call up, then runs it once between
cudaProfilerStart and cudaProfilerStop inside an NVTX range `gpuperf-counters#<k>`, and writes
`<k>\\t<test id>` to its window file; ncu's raw CSV names the range of every kernel it profiled.
"""
from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.child import pytest_command, without_options
from ..core.counters import OCCUPANCY, Counters, summed
from ..core.units import plural
from .device import has_cuda

#: Nsight Compute metric -> the stored counter (or `duration_ns`, the occupancy's weight).
METRICS = {
    "sm__inst_executed.sum": "instructions",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "lts__t_bytes.sum": "l2_bytes",
    "sm__inst_executed_pipe_tensor.sum": "tensor_instructions",
    "sm__warps_active.avg.pct_of_peak_sustained_active": OCCUPANCY,
    "gpu__time_duration.sum": "duration_ns",
}
RANGE_PREFIX = "gpuperf-counters#"
_RANGE = re.compile(re.escape(RANGE_PREFIX) + r"(\d+)")
#: Where ncu is looked for after $GPUPERF_NCU and the PATH.
NCU_PLACES = ("{cuda_home}/bin/ncu", "/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
#: Options of the user's command line the counting process leaves out: it writes nothing, and is
#: counted once (value options take the next argument unless given as `--opt=value`).
#: Options that would stop it early or pick tests by the timing run's cache are left out as well.
DROPPED_FLAGS = ("--gpuperf-save", "--gpuperf-counters", "--gpuperf-count-undecided", "-x", "--exitfirst", "--lf",
                 "--last-failed", "--ff", "--failed-first", "--sw", "--stepwise", "--sw-skip", "--stepwise-skip")
DROPPED_VALUES = ("--gpuperf-json", "--gpuperf-markdown", "--gpuperf-plot", "--gpuperf-trace-dir",
                  "--junitxml", "--junit-xml", "--benchmark-json", "--benchmark-save", "--maxfail")
#: Times each call is counted: two counts in one process give each recording a spread of its own
#: (a kernel whose programs spin on each other's results executes a few more or fewer instructions).
COUNTED_CALLS = 2
#: ncu's lines that say the counters are restricted to administrators.
PERMISSION_MARKS = ("ERR_NVGPUCTRPERM", "RmProfilingAdminOnly")
PERMISSION_FIX = ("the GPU's performance counters are restricted to administrators (ERR_NVGPUCTRPERM): run as "
                  "root, or load the driver with NVreg_RestrictProfilingToAdminUsers=0 "
                  "(https://developer.nvidia.com/ERR_NVGPUCTRPERM)")


#: ncu's error line for the profiled program's own exit status: pytest exits 1 when a test fails,
#: which costs no counter of the tests that passed.
APP_EXIT = "The application returned an error code"


class CounterError(Exception):
    """Counters could not be collected; the message names the cause and the fix in one line."""


@dataclass
class CounterRun:
    """What one counting process gave: counters per test id, and what it cost."""

    counters: dict[str, Counters] = field(default_factory=dict)
    seconds: float = 0.0
    kernels: int = 0
    log: Path | None = None
    warm_s: float = 0.0  # the calls' warm-up calls (compilation and autotuning: the timing run reuses them)
    counted_s: float = 0.0  # the counted calls, ncu's replays included

    def cost_text(self) -> str:
        """Where the counting process's time went."""
        rest = max(self.seconds - self.warm_s - self.counted_s, 0.0)
        return (f"{self.seconds:.0f} s: counted calls {self.counted_s:.0f} s, their warm-up calls {self.warm_s:.0f} s "
                f"(compiling, autotuning: cached for the timing run), the rest {rest:.0f} s (start-up, collection, "
                f"the tests' own checks)")


def find_ncu(env: dict[str, str] | None = None) -> str | None:
    """The ncu executable: $GPUPERF_NCU, the PATH, then the CUDA toolkit's usual places."""
    env = os.environ if env is None else env
    given = env.get("GPUPERF_NCU")
    if given:
        return given if os.path.isfile(given) and os.access(given, os.X_OK) else None
    found = shutil.which("ncu", path=env.get("PATH"))
    if found:
        return found
    home = env.get("CUDA_HOME") or env.get("CUDA_PATH") or "/usr/local/cuda"
    for place in NCU_PLACES:
        candidate = place.format(cuda_home=home)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def counting_args(args: Sequence[str], window_file: Path, cache_dir: Path, xdist: bool) -> list[str]:
    """The pytest arguments of the counting process: the user's, less its outputs and the counters
    option, in one process (`-n 0` under pytest-xdist) with a cache of its own."""
    out = without_options(args, DROPPED_FLAGS, DROPPED_VALUES)
    out += [f"--gpuperf-counter-pass={window_file}", "-o", f"cache_dir={cache_dir}", "-q", "-p", "no:randomly"]
    return out + (["-n", "0"] if xdist else [])


def ncu_command(ncu: str, csv_path: Path, program: Sequence[str]) -> list[str]:
    """ncu around `program`: only the profiler-started windows, their NVTX ranges named, the L2
    flushed before each kernel (DRAM bytes of a cold cache, as timed by default), clocks left alone
    (counts do not depend on them, and the timing run comes next)."""
    return [ncu, "--profile-from-start", "off", "--nvtx", "--metrics", ",".join(METRICS), "--csv", "--page", "raw",
            "--print-units", "base", "--cache-control", "all", "--clock-control", "none",
            "--target-processes", "application-only", "--log-file", str(csv_path), *program]


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def parse_csv(text: str) -> dict[int, list[dict[str, Any]]]:
    """ncu's raw CSV (`--csv --page raw --nvtx`) -> window index -> its kernels' counters.

    An NVTX range belongs to the thread that pushed it, and a backward's kernels come from
    autograd's own threads: so each window opens with a marker kernel launched in its range, and a
    kernel without a range belongs to the window of the last kernel that had one (ncu profiles
    kernels one at a time, in launch order, and only inside windows). The markers are dropped;
    kernels before the first marker are left out, and ncu's own `==PROF==` lines skipped."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    if not lines:
        return {}
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    nvtx = [name for name in reader.fieldnames or () if "Push/Pop_Range" in name or "Start/Stop_Range" in name]
    rows = sorted((row for row in reader if (row.get("ID") or "").strip().isdigit()),  # not the units row
                  key=lambda row: int(row["ID"]))
    windows: dict[int, list[dict[str, Any]]] = {}
    current: int | None = None
    for row in rows:
        match = next((m for m in (_RANGE.search(row.get(col) or "") for col in nvtx) if m), None)
        if match is not None and int(match.group(1)) != current:
            current = int(match.group(1))
            windows[current] = []
            continue  # the window's marker
        if current is not None:
            kernel: dict[str, Any] = {stored: value for metric, stored in METRICS.items()
                                      if (value := _number(row.get(metric) or "")) is not None}
            kernel["name"] = row.get("Kernel Name") or ""
            windows[current].append(kernel)
    return windows


@dataclass(frozen=True)
class Window:
    """One counted call: its test, the seconds its warm-up call took and those of the counted one
    (ncu's replay of its kernels included)."""

    nodeid: str
    warm_s: float
    counted_s: float


def read_windows(path: Path) -> dict[int, Window]:
    """The counting process's window file (`index, warm-up s, counted s, test id` per line)."""
    out: dict[int, Window] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            parts = line.split("\t", 3)
            if len(parts) == 4 and parts[0].isdigit():
                out[int(parts[0])] = Window(parts[3], float(parts[1]), float(parts[2]))
    return out


def counters_by_test(windows: dict[int, Window], kernels: dict[int, list[dict[str, Any]]]) -> dict[str, Counters]:
    """Each counted test's counters, one value per counted call; a window in which no kernel ran
    counts zero of everything."""
    out: dict[str, Counters] = {}
    for index in sorted(windows):
        nodeid, counted = windows[index].nodeid, summed(kernels.get(index, []))
        out[nodeid] = out[nodeid].merged(counted) if nodeid in out else counted
    return out


def count_call(call: Callable[[], Any], first: int, nodeid: str, window_file: Path) -> Any:
    """In the counting process: warm `call` up (compilation, autotuning, lazy initialisation), then
    run it COUNTED_CALLS times, each inside its own window (`first`, `first + 1`, ...), and note the
    windows' test id. Returns the last counted call's result."""
    import torch

    started = time.perf_counter()
    value = call()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - started
    marker = torch.zeros(1, device=torch.cuda.current_device())
    lines = []
    for index in range(first, first + COUNTED_CALLS):
        del value  # one output on the device at a time
        began = time.perf_counter()
        torch.cuda.nvtx.range_push(f"{RANGE_PREFIX}{index}")
        torch.cuda.profiler.start()
        try:
            marker.add_(1)  # the window's first kernel, from this thread (see parse_csv)
            value = call()
            torch.cuda.synchronize()
        finally:
            torch.cuda.profiler.stop()
            torch.cuda.nvtx.range_pop()
        lines.append(f"{index}\t{warm_s if index == first else 0.0:.4f}\t{time.perf_counter() - began:.4f}\t{nodeid}\n")
    with open(window_file, "a", encoding="utf-8") as out:
        out.writelines(lines)
    return value


def problem_in(log: str) -> str | None:
    """The reason in ncu's output that no counters came back, as one line (None if none is named)."""
    if any(mark in log for mark in PERMISSION_MARKS):
        return PERMISSION_FIX
    errors = [line.split("==ERROR==", 1)[1].strip() for line in log.splitlines() if "==ERROR==" in line]
    errors = [e for e in errors if not e.startswith(APP_EXIT)]
    return f"Nsight Compute: {errors[0]}" if errors else None


def counting_refusal() -> str | None:
    """Why counters cannot be counted here (no GPU, no ncu), as one line with the fix; None if they can."""
    if not has_cuda():
        return "no CUDA device is visible (counters count GPU kernels)"
    if find_ncu() is None:
        given = os.environ.get("GPUPERF_NCU")
        if given:
            return f"GPUPERF_NCU={given} is not an executable file; point it at Nsight Compute's ncu"
        return ("no Nsight Compute: ncu is not on the PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin; "
                "install the CUDA toolkit's Nsight Compute or set GPUPERF_NCU=/path/to/ncu")
    return None


def run_counting(args: Sequence[str], cwd: Path, xdist: bool, say: Callable[[str], None],
                 runner: Callable[..., Any] = subprocess.run, work: Path | None = None,
                 extra: Sequence[str] = (), when: str = "before timing") -> CounterRun:
    """Count every `gpu_benchmark` call the user's pytest command selects (narrowed by `extra`
    arguments, such as a plan of the tests to count and the device), in one process under ncu, its
    files in `work` (emptied first; a new temporary folder by default). CounterError (one line: cause
    and fix) where ncu is missing, refused or counted nothing."""
    refusal = counting_refusal()
    if refusal:
        raise CounterError(refusal)
    ncu = find_ncu()
    temporary = work is None
    try:
        if work is None:
            work = Path(tempfile.mkdtemp(prefix="gpuperf-counters-"))
        else:
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
    except OSError as exc:
        raise CounterError(f"cannot make the counting folder {work}: {exc.strerror or exc}") from None
    window_file, csv_path, log = work / "windows.tsv", work / "counters.csv", work / "pytest.log"
    program = pytest_command([*counting_args(args, window_file, work / "cache", xdist), *extra])
    say(f"gpuperf: counting hardware counters with {ncu} (each call {COUNTED_CALLS} times, {when}; log {log})")
    started = time.perf_counter()
    try:
        with open(log, "w", encoding="utf-8") as out:
            runner(ncu_command(ncu, csv_path, program), cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
    except OSError as exc:
        raise CounterError(f"cannot run {ncu}: {exc.strerror or exc} (GPUPERF_NCU names the ncu to use)") from None
    seconds = time.perf_counter() - started
    text = log.read_text(encoding="utf-8", errors="replace")
    csv_text = csv_path.read_text(encoding="utf-8", errors="replace") if csv_path.exists() else ""
    windows = read_windows(window_file)
    kernels = parse_csv(csv_text)
    problem = problem_in(text) or problem_in(csv_text)
    if problem and not kernels:
        raise CounterError(problem)
    if windows and not kernels:
        raise CounterError(f"Nsight Compute profiled no kernel in {plural(len(windows), 'counted call')} (see {log})")
    if not windows:
        tail = " | ".join(text.strip().splitlines()[-2:]) or "no output"
        raise CounterError(f"the counting process counted no gpu_benchmark call ({tail}; see {log})")
    run = CounterRun(counters_by_test(windows, kernels), seconds, sum(len(k) for k in kernels.values()), log,
                     sum(w.warm_s for w in windows.values()), sum(w.counted_s for w in windows.values()))
    if temporary:  # nothing went wrong, so nothing to look at
        shutil.rmtree(work, ignore_errors=True)
        run.log = None
    return run
