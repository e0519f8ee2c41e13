"""The GPU memory a process maps before its first measurement, so that every process times graph
calls in the same state.

On an H100, every graph-timed call of a process that has once mapped a large amount of GPU memory
reads ~0.35 µs above the same call in a process that has not. Once set, this lasts for the whole
process, even after the memory is freed. A whole suite or a real model is in the first state; a
`-k` selection of small tests would be in the second. The exception is the first CUDA process on a
freshly started machine, which reads as a small one whatever it maps (docs/measurement.md, "What
sets a process's graph-timed state"). So each process maps and frees FOOTPRINT_BYTES before its
first measurement, and `gpuperf ab` spends a machine's first process on `python -m` this module.
`GPUPERF_FOOTPRINT=0` turns both off.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

DISABLE_ENV = "GPUPERF_FOOTPRINT"
#: Mapped and freed once per device and process: 16 GiB sets the state on an H100, 2 GiB does not.
FOOTPRINT_BYTES = 16 << 30
#: ... where at least this much more stays free (a process that holds most of the GPU already has a
#: large footprint).
RESERVE_BYTES = 2 << 30
#: A child imports torch, creates a context and maps the footprint on each GPU: a few seconds.
CHILD_TIMEOUT_S = 120.0


def disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip() == "0"


def settle(torch: Any, index: int) -> bool:
    """Map FOOTPRINT_BYTES on CUDA device `index`, write them, and give them back to the driver.
    Returns whether it did (not where turned off, on a simulated device, or without the memory)."""
    if disabled() or not hasattr(torch.cuda, "mem_get_info"):
        return False
    free, _ = torch.cuda.mem_get_info(index)
    if free < FOOTPRINT_BYTES + RESERVE_BYTES:
        return False
    block = torch.ones(FOOTPRINT_BYTES, dtype=torch.uint8, device=f"cuda:{index}")
    torch.cuda.synchronize(index)
    del block
    torch.cuda.empty_cache()
    return True


def settle_in_child() -> str | None:
    """Settle every visible GPU in a process of its own, which is then the machine's first CUDA
    process if nothing ran before it. Returns a line saying what failed, or None."""
    if disabled():
        return None
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the directory holding pytest_gpuperf
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    try:
        out = subprocess.run([sys.executable, "-m", __name__], env=env, capture_output=True, text=True,
                             timeout=CHILD_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:]
        return f"exit status {out.returncode}: {' '.join(tail) or 'no output'}"
    return None


def _gpu_count() -> int:
    """GPUs the driver reports (NVML is quicker to ask than torch); -1 without nvidia-ml-py."""
    try:
        import pynvml
    except ImportError:
        return -1
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # no driver
        return 0
    try:
        return pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()


def main() -> None:
    if _gpu_count() == 0:
        return  # no GPU: no need to import torch
    import torch

    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            settle(torch, index)


if __name__ == "__main__":
    main()
