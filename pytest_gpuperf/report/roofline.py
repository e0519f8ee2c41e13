"""Roofline plots from hardware counters: per group, each result's arithmetic intensity (its declared
flops over the DRAM bytes its kernels moved) against the TFLOP/s it reached, under this GPU's
measured copy rate and matmul peaks. matplotlib is imported only when plotting."""
from __future__ import annotations

from pathlib import Path

from ..core.peak_names import COPY_PEAK
from ..core.records import Result
from ..core.units import as_number
from .plots import _plt, _safe_filename
from .rows import grouped, series_and_case

#: Peaks drawn as compute roofs (the device's measured matmul rates).
COMPUTE_PEAKS = ("bf16_tflops", "fp16_tflops", "tf32_tflops", "fp32_tflops")


def intensity(record: Result) -> float | None:
    """FLOP per DRAM byte of a result: its declared flops over the bytes its kernels read and wrote
    (None without flops or counters)."""
    flops = as_number(record.flops)
    counters = record.counters
    if not flops or counters is None:
        return None
    moved = (counters.center("dram_read_bytes") or 0.0) + (counters.center("dram_write_bytes") or 0.0)
    return flops / moved if moved > 0 else None


def _points(rows: list[Result]) -> list[tuple[str, float, float]]:
    """(series, FLOP/byte, TFLOP/s) of the rows that have both."""
    out = []
    for r in rows:
        x, tflops = intensity(r), as_number(r.tflops)
        if x is not None and tflops:
            split = series_and_case(str(r.id.param or ""))
            out.append((split[0] if split else str(r.id.param or r.id.name or ""), x, tflops))
    return out


def write_rooflines(directory: Path, results: list[Result], device: dict | None) -> list[Path]:
    """`roofline-<group>.png` for each group with counted results; [] where none has counters."""
    groups = [(g, pts) for g, rows in grouped(results) if (pts := _points(rows))]
    if not groups:
        return []
    plt = _plt()
    peaks = (device or {}).get("peaks") or {}
    copy = as_number(peaks.get(COPY_PEAK))
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for group, pts in groups:
        fig, ax = plt.subplots(figsize=(7.5, 5))
        xs = [x for _, x, _ in pts]
        low, high = min(xs) / 4, max(xs) * 4
        for series in sorted({s for s, _, _ in pts}):
            mine = [(x, y) for s, x, y in pts if s == series]
            ax.scatter([x for x, _ in mine], [y for _, y in mine], label=series, s=28)
        for name in COMPUTE_PEAKS:
            peak = as_number(peaks.get(name))
            if peak:
                ax.axhline(peak, linestyle=":", linewidth=1, color="grey")
                ax.text(high, peak, f" {name.split('_')[0]} {peak:.0f}", va="center", fontsize=7, color="grey")
        if copy:
            ax.plot([low, high], [copy * low / 1e3, copy * high / 1e3], color="black", linewidth=1,
                    label=f"copy {copy:,.0f} GB/s")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("FLOP per DRAM byte (declared flops / measured DRAM bytes)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{group}: roofline" + (f"  ({device.get('name')})" if device and device.get("name") else ""))
        ax.legend(fontsize=7, loc="lower right")
        path = directory / f"roofline-{_safe_filename(group)}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    return paths
