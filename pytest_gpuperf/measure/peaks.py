"""Measured peaks of this device (copy bandwidth, dense matmul rate per dtype): % of peak is only
honest against what this machine really reaches, so peaks are measured, not taken from datasheets.

A peak is checked whenever it is measured or read back (pytest's cache, a baseline): it must be a
positive, finite number inside wide bounds for the device kind. A bad or disturbed measurement is
taken once more; a peak still bad is dropped (no % of peak for that unit) with one note that says
how to re-measure, so a broken peak can neither crash a run nor show up as "1350% of peak".
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..core.peak_names import COPY_PEAK, matched_copy_kib, matched_copy_name
from .calibration import Calibration
from .device import describe, has_cuda, import_torch, peak_name, read_clocks
from .timer import TimingConfig, measure

# Sizes of the peak probes: a peak is the best rate over a few sizes, each measured the way tests are
# (cold L2), so that no test reads above "100% of peak" because its copy was smaller.
_COPY_BYTES = {"cuda": (64 << 20, 256 << 20, 1 << 30), "cpu": (1 << 27,)}
_MATMUL_N = {"cuda": (4096, 8192), "cpu": (1024,)}
#: Sampling budget of each probe.
_PROBE_BUDGET_S = 0.3
#: A memory-bound result moving fewer bytes than this is also held against copies of about its own
#: traffic (the powers of two either side, from MATCHED_COPY_MIN up), measured the same way: a call
#: timed in a CUDA graph runs back to back there, and a working set that fits in the L2 stays there
#: between its calls, for the copy as for the kernel. The fastest of those copies and the large
#: copy's peak sets the ceiling (docs/measurement.md, "% of peak").
MATCHED_COPY_BELOW = 256 << 20
MATCHED_COPY_MIN = 64 << 10

CUDA, CPU = "cuda", "cpu"
#: (lowest, highest) plausible peak per device kind and unit: wide enough for any real device, so
#: they only catch broken measurements. CUDA copy (read + written bytes): a Jetson Nano's LPDDR4 moves
#: ~25 GB/s, a B200's HBM3e 8 TB/s. CUDA matmul: ~0.2 TFLOP/s (Jetson Nano fp32) to ~5,000 (Blackwell
#: fp8, dense). CPU copy: one DDR3 channel moves >5 GB/s, a Xeon Max's HBM ~1 TB/s. CPU matmul:
#: ~0.01 TFLOP/s (one old core) to a few hundred (two AMX sockets). The issue's broken CPU peaks were
#: copy 0.5 GB/s and fp32 0.0 TFLOP/s on a machine that measures 12.7 and 0.10 when not disturbed.
PLAUSIBLE: dict[str, dict[str, tuple[float, float]]] = {
    CUDA: {"gbps": (10.0, 20_000.0), "tflops": (0.05, 20_000.0)},
    CPU: {"gbps": (1.0, 2_000.0), "tflops": (0.005, 500.0)},
}
_KIND_TEXT = {CUDA: "CUDA GPU", CPU: "CPU"}
_UNIT_TEXT = {"gbps": "GB/s", "tflops": "TFLOP/s"}
#: A probe whose samples spread more than this (relative MAD) ran beside other work: such a peak is
#: used for the run but never cached or written into a baseline (an idle GPU's probes read < 1%).
DISTURBED_NOISE = 0.05
#: A result this far above a peak means the peak is stale (measured on other clocks, or disturbed).
STALE_PEAK_RATIO = 1.05
#: How to re-measure, for the notes.
REMEASURE_HINT = "re-measure with `gpuperf device --refresh` in this directory (or `pytest --cache-clear`)"


@dataclass(frozen=True)
class PeakReading:
    """One probe's result: the best rate over its sizes and the relative noise of that size's samples."""

    value: float
    noise: float = 0.0


def device_kind(device: dict | None = None) -> str:
    """'cuda' or 'cpu': from a describe() dict (a CPU has no capability), else from this process."""
    if device is None:
        return CUDA if has_cuda() else CPU
    return CPU if not device.get("capability") else CUDA


def _unit(name: str) -> str:
    return name.rsplit("_", 1)[-1]


def peak_problem(name: str, value: Any, kind: str) -> str | None:
    """Why `value` cannot be the `name` peak of a device of `kind`, or None when it can."""
    unit = _unit(name)
    bounds = PLAUSIBLE[kind].get(unit)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"{value!r} is not a finite number"
    if value <= 0:
        return f"{value:g} is not positive"
    if bounds and not bounds[0] <= value <= bounds[1]:
        return f"{value:g} is outside {bounds[0]:g}..{bounds[1]:g} {_UNIT_TEXT.get(unit, unit)} for a {_KIND_TEXT[kind]}"
    return None



def valid_peaks(peaks: dict | None, kind: str) -> tuple[dict[str, float], dict[str, str]]:
    """(the plausible peaks as floats, name -> why for the others) of a peak map read back from a file."""
    good: dict[str, float] = {}
    bad: dict[str, str] = {}
    for name, value in (peaks or {}).items():
        problem = peak_problem(str(name), value, kind)
        if problem is None:
            good[str(name)] = float(value)
        else:
            bad[str(name)] = problem
    return good, bad


#: The versions a peak depends on: one measured under another of them is not reused.
PEAK_STACK = ("torch", "cuda", "driver")


def same_stack(software: dict, other: dict) -> bool:
    """Were peaks under `other`'s versions measured under `software`'s stack (PEAK_STACK)?"""
    return all(software.get(name) == other.get(name) for name in PEAK_STACK)


def cache_key(device_key: str, software: dict) -> str:
    """pytest cache key of the peaks of one device model under one software stack: a peak measured
    under another torch, CUDA or driver version is not reused."""
    parts = [f"{name}-{software.get(name) or 'none'}" for name in PEAK_STACK]
    return f"gpuperf/peaks/{device_key}/" + re.sub(r"[^A-Za-z0-9.+-]+", "_", "_".join(parts))


def matched_copy_names(traffic_bytes: int) -> list[str]:
    """Names of the copies of about `traffic_bytes` of traffic (read plus written) a memory-bound
    result is held against besides the large copy's peak; none from MATCHED_COPY_BELOW up."""
    if traffic_bytes >= MATCHED_COPY_BELOW:
        return []
    low = max(1 << max(int(traffic_bytes).bit_length() - 1, 0), MATCHED_COPY_MIN)
    sizes = sorted({low, max(low, 1 << (int(traffic_bytes) - 1).bit_length())})
    return [matched_copy_name(size) for size in sizes]


def measure_copy_gbps(config=None, calibration: Calibration | None = None,
                      copy_bytes: tuple[int, ...] | None = None) -> PeakReading:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written: the best over
    copies of `copy_bytes` each (default: the large probe sizes)."""
    torch = import_torch()
    kind = device_kind()
    best = PeakReading(0.0, math.inf)
    for nbytes in copy_bytes or _COPY_BYTES[kind]:
        src = torch.randn(nbytes // 4, device=kind)
        dst = torch.empty_like(src)
        m = measure(lambda: dst.copy_(src), config or TimingConfig(budget_s=_PROBE_BUDGET_S), inputs=src,
                    calibration=calibration)
        rate = 2 * nbytes / m.median_ms / 1e6 if m.median_ms > 0 else 0.0
        if rate > best.value:
            best = PeakReading(round(rate, 1), m.stats.noise)
    return best


def measure_matmul_tflops(dtype_name: str, config=None, calibration: Calibration | None = None) -> PeakReading:
    """Dense square matmul rate (TFLOP/s) through the framework's library for one dtype ('tf32' allowed)."""
    torch = import_torch()
    kind = device_kind()
    dtype = torch.float32 if dtype_name == "tf32" or kind == CPU else getattr(torch, dtype_name)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    best = PeakReading(0.0, math.inf)
    try:
        for n in _MATMUL_N[kind]:
            a = torch.randn(n, n, device=kind).to(dtype)
            b = torch.randn(n, n, device=kind).to(dtype)
            m = measure(lambda: a @ b, config or TimingConfig(budget_s=_PROBE_BUDGET_S), inputs=a,
                        calibration=calibration)
            rate = 2 * n**3 / m.median_ms / 1e9 if m.median_ms > 0 else 0.0
            if rate > best.value:
                best = PeakReading(round(rate, 1), m.stats.noise)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return best


def merged_peaks(*maps: dict | None) -> dict[str, float]:
    """Peak maps combined key by key, later ones winning; None counts as empty (a baseline may hold
    `peaks: null`, and a run that measured no peak must not drop the stored ones)."""
    out: dict[str, float] = {}
    for m in maps:
        out.update(m or {})
    return out


#: A probe: (peak name, dtype name or None for the copy peak) -> reading.
Probe = Callable[[str, "str | None"], PeakReading]


class Peaks:
    """This device's peaks: read from a cache dict (only plausible ones kept), measured on first use,
    re-measured once when bad, disturbed or stale, dropped when still bad. `notes` collects the
    warning lines to show (each once); `source` names the cache file the peaks came from, if any."""

    def __init__(self, store: dict | None = None, calibration: Calibration | None = None, *,
                 kind: str | None = None, source: str = "", probe: Probe | None = None) -> None:
        self.kind = kind or device_kind()
        self.calibration = calibration
        self.source = source
        self._probe = probe or self._measure
        self.values, self.rejected = valid_peaks(store, self.kind)  # rejected: cached values not used
        self.disturbed: set[str] = set()  # measured in a noisy probe: used now, never recorded
        self.fresh: set[str] = set()  # measured in this process
        self.dropped: dict[str, str] = {}  # name -> why: no % of peak for its unit in this process
        self.notes: list[str] = []
        self._stale_noted: set[str] = set()

    def _measure(self, name: str, dtype_name: str | None) -> PeakReading:
        kib = matched_copy_kib(name)
        if kib is not None:  # a copy of about a result's traffic: half of it read, half written
            return measure_copy_gbps(calibration=self.calibration, copy_bytes=(kib << 9,))
        if dtype_name is None:
            return measure_copy_gbps(calibration=self.calibration)
        return measure_matmul_tflops(dtype_name, calibration=self.calibration)

    def copy_gbps(self) -> float | None:
        return self.get(COPY_PEAK)

    def memory_ceiling(self, traffic_bytes: int) -> str | None:
        """The name of the peak a memory-bound result of `traffic_bytes` is held against: the fastest of
        the large copy and the copies of about its own traffic (MATCHED_COPY_BELOW); None without one."""
        rates = {name: self.get(name) for name in [COPY_PEAK, *matched_copy_names(traffic_bytes)]}
        rates = {name: rate for name, rate in rates.items() if rate is not None}
        return max(rates, key=rates.get) if rates else None

    def matmul_tflops(self, dtype_name: str) -> float | None:
        return self.get(peak_name(dtype_name), dtype_name)

    def get(self, name: str, dtype_name: str | None = None) -> float | None:
        """The peak `name`, measured if not known; None when it could not be measured plausibly."""
        if name in self.values:
            return self.values[name]
        if name in self.dropped:
            return None
        readings = [self._probe(name, dtype_name)]
        if peak_problem(name, readings[0].value, self.kind) or readings[0].noise > DISTURBED_NOISE:
            readings.append(self._probe(name, dtype_name))  # once more: a load spike passes
        usable = [r for r in readings if peak_problem(name, r.value, self.kind) is None]
        if not usable:
            self._drop(name, readings)
            return None
        best = min(usable, key=lambda r: r.noise)
        if best.noise > DISTURBED_NOISE:
            self.disturbed.add(name)
        self.values[name] = best.value
        self.fresh.add(name)
        return best.value

    def _drop(self, name: str, readings: list[PeakReading]) -> None:
        self.dropped[name] = peak_problem(name, readings[-1].value, self.kind) or "implausible"
        cached = f" (the cached {self.rejected[name]} was not used)" if name in self.rejected else ""
        measured = " then ".join(f"{r.value:g}" for r in readings)
        side = "memory" if _unit(name) == "gbps" else "compute"
        self.notes.append(
            f"gpuperf: peak {name} measured {measured}: {self.dropped[name]}{cached}; % of peak is left out "
            f"for {side}-bound results" + (f". Peaks are cached in {self.source}: {REMEASURE_HINT}" if self.source
                                           else ""))

    def fraction(self, name: str, rate: float, dtype_name: str | None = None,
                 recorded: float | None = None) -> float | None:
        """rate / the `name` peak, None without a usable peak. A result above STALE_PEAK_RATIO of a
        cached peak re-measures it once; still above, a note says the peak looks stale (not hidden).
        Neither where the test's baseline entry read about as far above this peak (`recorded`: its
        rate over the `name` peak it was held against, within STALE_PEAK_RATIO): the probe under-reads
        this call (a matmul sampled at a clock the probe's did not run at), and measuring it again says
        nothing new. A peak since cached lower still reads as stale."""
        peak = self.get(name, dtype_name)
        if peak is None:
            return None
        if recorded is not None and rate / peak <= recorded * STALE_PEAK_RATIO:
            return rate / peak
        if rate / peak > STALE_PEAK_RATIO and name not in self.fresh:
            del self.values[name]
            peak = self.get(name, dtype_name)
            if peak is None:
                return None
        if rate / peak > STALE_PEAK_RATIO and name not in self._stale_noted:
            self._stale_noted.add(name)
            self.notes.append(
                f"gpuperf: a result reads {100 * rate / peak:.0f}% of the {name} peak {peak:g} measured here "
                f"(re-measured): either its data stays in the L2 cache between samples (a working set smaller "
                f"than the L2, see docs/measurement.md) or the peak looks stale (other clocks, or measured "
                f"under load; {REMEASURE_HINT})")
        return rate / peak

    def recordable(self) -> dict[str, float]:
        """The peaks fit to cache and to write into a baseline: plausible and not measured disturbed."""
        return {k: v for k, v in self.values.items() if k not in self.disturbed}

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes


def current_device(measure_peaks: bool = False) -> dict[str, Any]:
    """describe() of the current device, with copy and matmul peaks measured when asked (for `gpuperf
    device`): `peaks` holds the recordable ones, `peak_notes` says what was left out and why."""
    info = describe()
    if measure_peaks:
        peaks = Peaks()
        peaks.copy_gbps()
        dtypes = ("bfloat16", "float16", "tf32", "float32") if has_cuda() else ("float32",)
        for dtype_name in dtypes:
            peaks.matmul_tflops(dtype_name)
        info["peaks"] = peaks.recordable()
        disturbed = sorted(peaks.disturbed)
        info["peak_notes"] = peaks.take_notes() + (
            [f"measured under load (samples spread > {DISTURBED_NOISE:.0%}), not stored: {', '.join(disturbed)}"]
            if disturbed else [])
    clocks = read_clocks(import_torch().cuda.current_device() if has_cuda() else None)
    info["sm_clock_mhz"] = clocks.sm_clock_mhz
    return info
