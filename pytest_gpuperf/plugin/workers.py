"""pytest-xdist workers against GPUs: under --gpuperf each worker times on a GPU of its own, so a
run with more workers than GPUs is refused, in the controller before any worker starts."""
from __future__ import annotations

import pytest


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


def sharing_message(workers: int, gpus: int) -> str | None:
    """The refusal of `workers` workers on `gpus` GPUs, or None when each worker has a GPU."""
    if workers <= gpus:
        return None
    return (f"--gpuperf with -n {workers}: only {gpus} GPU(s) visible; workers sharing a GPU would time "
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
