"""The README's results tables and plots, generated from a committed baseline.

    python docs/results.py baselines/nvidia-h100-80gb-hbm3.yaml --plots docs --prefix h100

prints the Markdown tables (16384² element-wise and softmax in ms / GB/s, matmul and attention in
TFLOP/s) and, with --plots, writes <prefix>-softmax.png and <prefix>-attention-fwd.png.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from pytest_gpuperf.report.plots import write_plots
from pytest_gpuperf.store import baseline as baseline_mod
from pytest_gpuperf.store.results import results_from_baseline

IMPLS = ("torch_manual", "torch", "compiled", "triton", "cuda")
ELEMENTWISE = (("ELU", "test_elementwise.py::test_elu[{impl}-{dtype}-16384x16384]"),
               ("GeLU tanh", "test_elementwise.py::test_gelu[tanh-{impl}-{dtype}-16384x16384]"),
               ("GeLU erf", "test_elementwise.py::test_gelu[erf-{impl}-{dtype}-16384x16384]"),
               ("softmax", "test_softmax.py::test_softmax[{impl}-{dtype}-16384x16384]"))
ATTENTION_IMPLS = ("triton", "flex", "torch_flash", "torch_cudnn", "torch_efficient", "compiled", "torch_manual")


def _cell(entry: dict | None, *keys: str) -> str:
    if not entry:
        return "-"
    parts = []
    for key in keys:
        v = entry.get(key)
        parts.append("-" if v is None else f"{v:.3f}" if key == "median_ms" else f"{v:,.0f}")
    return " / ".join(parts)


def tables(entries: dict[str, dict]) -> str:
    get = lambda tail: entries.get(f"perf_tests/{tail}")  # noqa: E731
    lines = ["| kernel (16384x16384) | dtype | " + " | ".join(IMPLS) + " |", "| --- " * (len(IMPLS) + 2) + "|"]
    for name, pattern in ELEMENTWISE:
        for dtype in ("float32", "bfloat16"):
            cells = [_cell(get(pattern.format(impl=i, dtype=dtype)), "median_ms", "gbps") for i in IMPLS]
            lines.append(f"| {name} | {dtype} | " + " | ".join(cells) + " |")
    mm = ("torch", "compiled", "triton", "cuda")
    lines += ["", "| matmul TFLOP/s | " + " | ".join(mm) + " |", "| --- " * (len(mm) + 1) + "|"]
    for dtype in ("bfloat16", "float16", "tf32", "float32"):
        for n in (4096, 8192):
            cells = [_cell(get(f"test_matmul.py::test_matmul[{i}-{dtype}-{n}x{n}x{n}]"), "tflops") for i in mm]
            lines.append(f"| {dtype} {n} | " + " | ".join(cells) + " |")
    lines += ["", "| attention B4 H16 N4096 D128 bf16, TFLOP/s | " + " | ".join(ATTENTION_IMPLS) + " |",
              "| --- " * (len(ATTENTION_IMPLS) + 1) + "|"]
    for direction in ("fwd", "bwd"):
        for mask in ("full", "causal"):
            cells = [_cell(get(f"test_attention.py::test_attention_{direction}[{i}-bfloat16-{mask}-B4H16N4096D128]"),
                           "tflops") for i in ATTENTION_IMPLS]
            lines.append(f"| {direction} {mask} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plots(base: baseline_mod.Baseline, directory: Path, prefix: str) -> None:
    wanted = {"test_softmax": f"{prefix}-softmax.png", "test_attention_fwd": f"{prefix}-attention-fwd.png"}
    results = [r for r in results_from_baseline(base) if r["group"] in wanted]
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for path in write_plots(Path(tmp), results, device=base.device):
            shutil.move(path, directory / wanted[path.stem])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", type=Path)
    parser.add_argument("--plots", type=Path, help="directory for the PNGs")
    parser.add_argument("--prefix", default="gpu")
    args = parser.parse_args()
    base = baseline_mod.load(args.baseline)
    if base is None:
        parser.error(f"{args.baseline}: no such file")
    print(tables(base.entries))
    if args.plots:
        plots(base, args.plots, args.prefix)


if __name__ == "__main__":
    main()
