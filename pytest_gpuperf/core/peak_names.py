"""The names of measured peaks, as baselines store them and tables show them."""
from __future__ import annotations

import re

#: The large copy's rate (read plus written bytes per second), the memory roof.
COPY_PEAK = "copy_gbps"
_MATCHED_COPY = re.compile(r"copy_(\d+)kib_gbps")


def matched_copy_name(size_bytes: int) -> str:
    """The peak name of a copy of `size_bytes` of traffic: 'copy_8192kib_gbps'."""
    return f"copy_{size_bytes >> 10}kib_gbps"


def matched_copy_kib(name: str) -> int | None:
    """The KiB of traffic a matched copy's peak name holds; None for any other name."""
    matched = _MATCHED_COPY.fullmatch(name)
    return int(matched.group(1)) if matched else None


def peak_label(name: str | None, above_peak: float | None = None) -> str:
    """The peak a result is held against, as a table shows it: 'copy', 'copy 8 MiB' (a copy of about
    its own traffic), 'bf16 mm' (cuBLAS's dense matmul rate), or 'kernel' where the result beat
    that peak and sets its own ceiling; '-' for none."""
    if above_peak:
        return "kernel"
    if not isinstance(name, str) or not name:
        return "-"
    kib = matched_copy_kib(name)
    if kib is not None:
        return f"copy {kib >> 10} MiB" if kib >= 1024 else f"copy {kib} KiB"
    if name == COPY_PEAK:
        return "copy"
    return name.removesuffix("_tflops") + " mm"
