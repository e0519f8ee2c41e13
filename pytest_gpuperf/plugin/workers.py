"""pytest-xdist workers against GPUs: under --gpuperf each worker times on a GPU of its own, so a
run with more workers than GPUs is refused, in the controller before any worker starts; a worker
whose session ended normally ends without the interpreter's teardown."""
from __future__ import annotations

import atexit
import logging
import os
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
_ending = {"armed": False}  # set by end_without_teardown, read by _end_if_armed at exit


def end_without_teardown() -> None:
    """Called by a pytest-xdist worker under --gpuperf whose session ended normally: once the exit
    handlers registered after this module's import have run (the conftests' and torch's), the
    process ends without the interpreter's own teardown (its CUDA context, torch's destructors),
    which the controller waits for after the last test (docs/measurement.md, "Where a suite's time
    goes")."""
    _ending["armed"] = os.environ.get(FAST_EXIT_ENV, "1") != "0"


def _end_if_armed() -> None:
    """Registered at this module's import, before any conftest or torch is, so it runs among the
    last exit handlers. A process coverage.py measures, or with child processes still running, ends
    as usual: their exit handlers may have been registered earlier and so come after this one."""
    if not _ending["armed"] or _coverage_running() or _children_running():
        return
    logging.shutdown()  # registered by pytest's own imports, before this
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(0)


def _coverage_running() -> bool:
    coverage = sys.modules.get("coverage")
    current = getattr(getattr(coverage, "Coverage", None), "current", None)
    return bool(current and current())


def _children_running() -> bool:
    multiprocessing = sys.modules.get("multiprocessing")
    return bool(multiprocessing and multiprocessing.active_children())


atexit.register(_end_if_armed)
