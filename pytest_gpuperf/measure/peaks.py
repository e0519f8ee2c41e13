"""Measured peaks of this device (copy bandwidth, dense matmul rate per dtype): % of peak is only
honest against what this machine really reaches, so peaks are measured, not taken from datasheets."""
from __future__ import annotations

from typing import Any

from .calibration import Calibration
from .device import import_torch, describe, has_cuda, peak_name, read_clocks
from .timer import TimingConfig, measure

# Sizes of the peak probes: a peak is the best rate over a few sizes, each measured the way tests are
# (cold L2), so that no test reads above "100% of peak" because its copy was smaller.
_COPY_BYTES = {"cuda": (64 << 20, 256 << 20, 1 << 30), "cpu": (1 << 27,)}
_MATMUL_N = {"cuda": (4096, 8192), "cpu": (1024,)}
#: Sampling budget of each probe.
_PROBE_BUDGET_S = 0.3


def measure_copy_gbps(config=None, calibration: Calibration | None = None) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written."""
    torch = import_torch()
    kind = "cuda" if has_cuda() else "cpu"
    best = 0.0
    for nbytes in _COPY_BYTES[kind]:
        src = torch.randn(nbytes // 4, device=kind)
        dst = torch.empty_like(src)
        m = measure(lambda: dst.copy_(src), config or TimingConfig(budget_s=_PROBE_BUDGET_S), inputs=src,
                    calibration=calibration)
        best = max(best, 2 * nbytes / m.median_ms / 1e6)
    return round(best, 1)


def measure_matmul_tflops(dtype_name: str, config=None, calibration: Calibration | None = None) -> float:
    """Dense square matmul rate (TFLOP/s) through the framework's library for one dtype ('tf32' allowed)."""
    torch = import_torch()
    kind = "cuda" if has_cuda() else "cpu"
    dtype = torch.float32 if dtype_name == "tf32" or kind == "cpu" else getattr(torch, dtype_name)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    best = 0.0
    try:
        for n in _MATMUL_N[kind]:
            a = torch.randn(n, n, device=kind).to(dtype)
            b = torch.randn(n, n, device=kind).to(dtype)
            m = measure(lambda: a @ b, config or TimingConfig(budget_s=_PROBE_BUDGET_S), inputs=a,
                        calibration=calibration)
            best = max(best, 2 * n**3 / m.median_ms / 1e9)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return round(best, 1)


def merged_peaks(*maps: dict | None) -> dict[str, float]:
    """Peak maps combined key by key, later ones winning; None counts as empty (a baseline may hold
    `peaks: null`, and a run that measured no peak must not drop the stored ones)."""
    out: dict[str, float] = {}
    for m in maps:
        out.update(m or {})
    return out


class Peaks:
    """Measured peaks of this device, measured on first use and kept in a cache dict (pytest's cache)."""

    def __init__(self, store: dict[str, float] | None = None, calibration: Calibration | None = None) -> None:
        self.values: dict[str, float] = dict(store or {})
        self.calibration = calibration

    def copy_gbps(self) -> float:
        if "copy_gbps" not in self.values:
            self.values["copy_gbps"] = measure_copy_gbps(calibration=self.calibration)
        return self.values["copy_gbps"]

    def matmul_tflops(self, dtype_name: str) -> float:
        name = peak_name(dtype_name)
        if name not in self.values:
            self.values[name] = measure_matmul_tflops(dtype_name, calibration=self.calibration)
        return self.values[name]


def current_device(measure_peaks: bool = False) -> dict[str, Any]:
    """describe() of the current device, with copy and matmul peaks measured when asked (for `gpuperf device`)."""
    info = describe()
    if measure_peaks:
        peaks = Peaks()
        peaks.copy_gbps()
        dtypes = ("bfloat16", "float16", "tf32", "float32") if has_cuda() else ("float32",)
        for dtype_name in dtypes:
            peaks.matmul_tflops(dtype_name)
        info["peaks"] = peaks.values
    clocks = read_clocks(import_torch().cuda.current_device() if has_cuda() else None)
    info["sm_clock_mhz"] = clocks.sm_clock_mhz
    return info
