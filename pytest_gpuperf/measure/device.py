"""Which device the run measures: its stable key, properties, clocks and measured peaks.

The key names a device *model* (and MIG slice), never one card, so a baseline recorded on one card
applies to every card of that model. Peaks are measured, not taken from datasheets: % of peak is
only honest against what this machine really reaches.
"""
from __future__ import annotations

import functools
import os
import platform
import re
from dataclasses import dataclass, field
from typing import Any

#: The name of the power cap's clock-event reason.
POWER_CAP = "sw_power_cap"
#: The power cap holds a call's clock down when its reason is set and the SM clock is below this
#: share of the maximum: NVML keeps the reason set after the load that raised it (an idle H100 read
#: it at 1965 of 1980 MHz), while capped loads ran at 1275-1845 MHz.
POWER_LIMITED_SHARE = 0.97
# NVML clock-event reasons that mean the clocks are held down by something other than the load.
_THROTTLE_NAMES = {
    "SwPowerCap": POWER_CAP,
    "HwSlowdown": "hw_slowdown",
    "HwThermalSlowdown": "hw_thermal",
    "SwThermalSlowdown": "sw_thermal",
    "HwPowerBrakeSlowdown": "hw_power_brake",
}


def slug(text: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def import_torch():
    import torch

    return torch


def has_cuda() -> bool:
    """True when torch is importable and sees a CUDA device."""
    try:
        return import_torch().cuda.is_available()
    except ImportError:
        return False


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def _nvml_handle(index: int):
    """The NVML handle of torch's CUDA device `index` (matched by UUID), or None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML (no driver, no nvidia-ml-py): clocks stay unknown
        return None
    torch = import_torch()
    uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "")
    for candidate in (f"GPU-{uuid}", f"MIG-{uuid}", uuid):
        try:
            return pynvml.nvmlDeviceGetHandleByUUID(candidate)
        except Exception:  # noqa: BLE001 - try the next spelling of the UUID
            continue
    try:
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # noqa: BLE001
        return None


@dataclass
class ClockState:
    """SM clock and clock-event reasons read from NVML at one moment."""

    sm_clock_mhz: int | None = None
    throttle: list[str] = field(default_factory=list)
    max_sm_clock_mhz: int | None = None

    @property
    def power_capped(self) -> bool:
        """Has the power cap acted? NVML keeps its reason set at idle after the load that raised it."""
        return POWER_CAP in self.throttle

    @property
    def power_limited(self) -> bool:
        """Is the power cap holding the SM clock down (POWER_LIMITED_SHARE)?"""
        return (self.power_capped and bool(self.sm_clock_mhz and self.max_sm_clock_mhz)
                and self.sm_clock_mhz < POWER_LIMITED_SHARE * self.max_sm_clock_mhz)


def read_clocks(index: int | None) -> ClockState:
    """Current SM clock and active throttle reasons; empty on CPU or without NVML."""
    if index is None:
        return ClockState()
    handle = _nvml_handle(index)
    if handle is None:
        return ClockState()
    import pynvml

    state = ClockState(max_sm_clock_mhz=_max_sm_clock(index))
    try:
        state.sm_clock_mhz = int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
        reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
    except Exception:  # noqa: BLE001 - some virtualised GPUs refuse these queries
        return state
    for nvml_name, name in _THROTTLE_NAMES.items():
        if reasons & getattr(pynvml, f"nvmlClocksEventReason{nvml_name}", 0):
            state.throttle.append(name)
    return state


#: nvmlFieldValue_t's union member by its valueType (NVML_VALUE_TYPE_*).
_FIELD_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def power_share(index: int | None) -> float | None:
    """Power drawn now as a share of the enforced power limit, or None where NVML does not say. The
    instant reading (NVML_FI_DEV_POWER_INSTANT), not the one-second average, which lags a load."""
    handle = None if index is None else _nvml_handle(index)
    if handle is None:
        return None
    import pynvml

    try:
        field = pynvml.nvmlDeviceGetFieldValues(handle, [pynvml.NVML_FI_DEV_POWER_INSTANT])[0]
        limit_mw = pynvml.nvmlDeviceGetEnforcedPowerLimit(handle)
    except Exception:  # noqa: BLE001 - older drivers lack the field; virtualised GPUs refuse power queries
        return None
    if field.nvmlReturn != pynvml.NVML_SUCCESS or not limit_mw or field.valueType >= len(_FIELD_MEMBERS):
        return None
    drawn_mw = float(getattr(field.value, _FIELD_MEMBERS[field.valueType]))
    return drawn_mw / limit_mw if drawn_mw > 0 else None  # 0: a virtualised GPU that does not say


@functools.cache
def _max_sm_clock(index: int) -> int | None:
    """Device `index`'s maximum SM clock in MHz (None where NVML refuses it)."""
    import pynvml

    handle = _nvml_handle(index)
    try:
        return int(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001 - some virtualised GPUs refuse clock queries
        return None


def _mig_suffix(index: int, sm_count: int, memory_gib: float) -> str:
    """'' for a whole GPU; a slice tag when the device is a MIG instance."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    handle = _nvml_handle(index)
    if handle is not None:
        import pynvml

        try:
            if pynvml.nvmlDeviceIsMigDeviceHandle(handle):
                return "-mig-" + slug(pynvml.nvmlDeviceGetName(handle).split("MIG", 1)[-1])
        except Exception:  # noqa: BLE001 - older drivers: fall through to the environment
            pass
    if "MIG-" in visible:
        return f"-mig-{sm_count}sm-{round(memory_gib)}gb"
    return ""


def describe(index: int | None = None) -> dict[str, Any]:
    """The device dict stored in baselines: key, name, capability, sm_count, memory_gib (peaks added later)."""
    if not has_cuda():
        name = _cpu_name()
        return {"key": slug(f"cpu-{platform.machine()}-{name}"), "name": name, "capability": None,
                "sm_count": os.cpu_count(), "memory_gib": None, "peaks": {}}
    torch = import_torch()
    index = torch.cuda.current_device() if index is None else index
    props = torch.cuda.get_device_properties(index)
    memory_gib = round(props.total_memory / 2**30, 1)
    key = slug(props.name) + _mig_suffix(index, props.multi_processor_count, memory_gib)
    return {"key": key, "name": props.name, "capability": f"{props.major}.{props.minor}",
            "sm_count": props.multi_processor_count, "memory_gib": memory_gib, "peaks": {}}


def l2_cache_bytes() -> int | None:
    """The current CUDA device's L2 size in bytes (None without CUDA)."""
    if not has_cuda():
        return None
    torch = import_torch()
    return int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)) or None


def software_versions() -> dict[str, str | None]:
    """Versions that change what a kernel costs: torch, triton, CUDA, driver, Python, this plugin (how
    a result was timed is recorded per result: core.versions.TIMING_VERSION)."""
    return dict(_software_versions())


@functools.cache
def _software_versions() -> dict[str, str | None]:
    """Read once per process: it imports triton and asks NVML, and the plugin needs it per test."""
    from .. import __version__

    versions: dict[str, str | None] = {"gpuperf": __version__, "python": platform.python_version()}
    try:
        torch = import_torch()
        versions["torch"] = torch.__version__
        versions["cuda"] = torch.version.cuda
    except ImportError:
        versions["torch"] = versions["cuda"] = None
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        versions["triton"] = None
    versions["driver"] = None
    if has_cuda():
        try:
            import pynvml

            pynvml.nvmlInit()
            versions["driver"] = pynvml.nvmlSystemGetDriverVersion()
        except Exception:  # noqa: BLE001 - no NVML: driver unknown
            pass
    return versions


def peak_name(dtype_name: str) -> str:
    """Key of the matmul peak for a dtype: 'bfloat16' -> 'bf16_tflops'."""
    short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "tf32": "tf32",
             "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}.get(dtype_name, dtype_name)
    return f"{short}_tflops"
