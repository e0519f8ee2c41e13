"""pytest-xdist workers against GPUs: under --gpuperf each worker times on a GPU of its own, so a
run with more workers than GPUs is refused, in the controller before any worker starts."""
from __future__ import annotations

import re
import sys

import pytest

from ..core.units import plural


def gpu_count() -> int:
    """CUDA devices this process may use (0 without torch or CUDA). torch.cuda.device_count()
    asks NVML where it can, so the controller creates no CUDA context just to count."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


def xdist_workers(config: pytest.Config) -> int:
    """How many workers pytest-xdist will start: its `--tx` specs ('N*popen' counts N), which its
    pytest_cmdline_main fills from `-n` (with 'auto' resolved) before any plugin is configured."""
    if getattr(config.option, "dist", "no") == "no":
        return 0
    total = 0
    for spec in getattr(config.option, "tx", None) or ():
        count, star, _ = str(spec).partition("*")
        total += int(count) if star and count.isdigit() else 1
    return total


def xdist_share(config: pytest.Config) -> tuple[int, int]:
    """(index, count) of this pytest-xdist worker among the run's workers, from the workerinput the
    controller gave it ('gw2' of 4 -> (2, 4)); (0, 1) in any other process."""
    given = getattr(config, "workerinput", None) or {}
    digits = re.sub(r"\D", "", str(given.get("workerid", "")))
    count = int(given.get("workercount", 1) or 1)
    index = int(digits) if digits else 0
    return (index, count) if 0 <= index < count else (0, 1)


def sharing_message(workers: int, gpus: int) -> str | None:
    """The refusal of `workers` workers on `gpus` GPUs, or None when each worker has a GPU."""
    if workers <= gpus:
        return None
    return (f"--gpuperf with -n {workers}: only {plural(gpus, 'GPU')} visible; workers sharing a GPU would time "
            f"each other's work (use -n {gpus} or fewer)")


def refuse_gpu_sharing(config: pytest.Config) -> None:
    """In the controller: a usage error before workers start when there are more than GPUs. Without
    a GPU the run times on the host, where the controller warns instead (plugin.pytest_configure)."""
    workers = xdist_workers(config)
    if workers > 1:
        gpus = gpu_count()
        message = sharing_message(workers, gpus) if gpus else None
        if message:
            raise pytest.UsageError(message)


#: pytest-xdist workerinput key: the controller hands tests out in the order the workers collect them.
LOAD_INPUT = "gpuperf_load"


def load_distribution(config: pytest.Config) -> bool:
    """Does pytest-xdist hand the tests out in their collected order (its load distribution)? A
    worker, whose own options say "no", knows from what the controller put in its workerinput."""
    if hasattr(config, "workerinput"):
        return bool(config.workerinput.get(LOAD_INPUT))
    return getattr(config.option, "dist", "no") == "load"


def dispatch_one_at_a_time(config: pytest.Config) -> None:
    """Under the load distribution, hand the tests out one at a time (pytest-xdist's --maxschedchunk 1,
    unless given): the workers order them longest first by recorded time (plugin/shard.py), and a
    worker handed a batch of the longest ones at the start would finish the run alone."""
    if load_distribution(config) and getattr(config.option, "maxschedchunk", 0) is None:
        config.option.maxschedchunk = 1


#: Set to 0 to let pytest-xdist workers under --gpuperf end through the interpreter's full teardown.
FAST_EXIT_ENV = "GPUPERF_FAST_EXIT"


def end_without_teardown(config: pytest.Config) -> None:
    """In a pytest-xdist worker under --gpuperf: once the worker's session has finished and the exit
    handlers registered after this call have run (torch's compile workers shut down, caches written
    at exit), end the process without the interpreter's own teardown, whose CUDA context and torch
    destructors the controller waits for after the last test (docs/measurement.md, "Where a
    suite's time goes"). A worker that never finished its session, or that coverage.py measures,
    exits as usual."""
    import atexit
    import os

    if not hasattr(config, "workerinput") or os.environ.get(FAST_EXIT_ENV, "1") == "0":
        return

    def end() -> None:
        if not config.stash.get(WORKER_FINISHED, False) or _coverage_running():
            return
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        os._exit(0)

    atexit.register(end)


def _coverage_running() -> bool:
    """Is coverage.py measuring this process? It saves its data in an exit handler of its own, which
    may have been registered before end_without_teardown's and so run after it."""
    coverage = sys.modules.get("coverage")
    current = getattr(getattr(coverage, "Coverage", None), "current", None)
    return bool(current and current())


#: config.stash key: the worker's session has finished (end_without_teardown may end its process).
WORKER_FINISHED = pytest.StashKey[bool]()
