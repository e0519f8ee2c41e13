"""Pick the Triton matmul's config for each launch of this GPU model, with gpu_benchmark's timer.

    python -m kernels.tune_matmul [--shapes 4096x4096x4096,...] [--precisions bfloat16,tf32]
                                  [--rounds 3] [--write] [--out sweep.json]

On a GPU: for each shape and precision, every config that competes for the launch
(matmul_triton.candidates) is timed with a forced `config=`, the configs taking turns for `--rounds`
rounds so that clock and power drift fall on all of them alike; the pick is the config with the
lowest median of its rounds' medians. `--write` stores the picks under this GPU model's key in
kernels/matmul_picks.yaml, which triton_matmul then uses instead of autotuning in every process.
The defaults are the shapes the perf suite times on a GPU.
"""
from __future__ import annotations

import argparse
import statistics

import torch
import yaml

from kernels import matmul, matmul_configs, matmul_triton, tuning
from pytest_gpuperf.measure.device import describe
from pytest_gpuperf.measure.timer import TimingConfig

SUITE_SHAPES = ((512, 512, 512), (4096, 4096, 4096), (8192, 8192, 8192), (4097, 4095, 1023),
                (16384, 16384, 64), (64, 16384, 16384))
PRECISIONS = ("bfloat16", "float16", "float32", "tf32")
#: timing budget per config and round (s): 3 rounds of ~5 configs keep a shape near 5 s
BUDGET_S = 0.3


def _fields(config: dict) -> list:
    """A config as the picks file stores it: the table's field tuple (GROUP_M is fixed)."""
    return [config[f] for f in config if f != "GROUP_M"]


def tune(shapes, precisions, rounds: int) -> tuple[dict[str, list], dict[str, dict[str, list[float]]]]:
    """(pick key -> fields of the fastest config, pick key -> config -> its medians in ms)."""
    timing = TimingConfig(budget_s=BUDGET_S)
    picks, timings = {}, {}
    for shape in shapes:
        for precision in precisions:
            a, b = matmul.make_inputs(shape, precision, "cuda")
            tf32 = matmul.is_tf32(precision)
            key, configs = matmul_triton.candidates(a, b, tf32=tf32)
            runs: dict[str, list[float]] = {str(_fields(c)): [] for c in configs}
            for _ in range(rounds):
                for config in configs:
                    ms = tuning.median_ms(lambda c=config: matmul_triton.triton_matmul(a, b, tf32=tf32, config=c),
                                          timing, (a, b))
                    if isinstance(ms, float):
                        runs[str(_fields(config))].append(ms)
            medians = {name: statistics.median(v) for name, v in runs.items() if v}
            best = min(medians, key=medians.get)
            picks[key] = next(_fields(c) for c in configs if str(_fields(c)) == best)
            timings[key] = runs
            line = "  ".join(f"{name} {ms * 1e3:.1f}" for name, ms in sorted(medians.items(), key=lambda kv: kv[1]))
            print(f"{key}: pick {best}  (µs: {line})", flush=True)
    return picks, timings


def write(picks: dict[str, list]) -> None:
    """Store picks under this GPU model's key, keeping other models' and other launches' picks."""
    table = yaml.safe_load(matmul_configs.PICKS_PATH.read_text()) if matmul_configs.PICKS_PATH.exists() else {}
    table = table or {}
    table.setdefault(describe(0)["key"], {}).update(picks)
    header = ("# Triton matmul configs per GPU model and launch, written by `python -m kernels.tune_matmul --write`\n"
              "# (fields as matmul_configs.TMA_FIELDS / PTR_FIELDS); launches not listed are autotuned.\n")
    matmul_configs.PICKS_PATH.write_text(header + yaml.safe_dump(table, sort_keys=True, default_flow_style=None, width=200))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", help="comma-separated MxNxK shapes (default: the perf suite's)")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="store the picks in kernels/matmul_picks.yaml")
    parser.add_argument("--out", help="write every config's medians as JSON")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("picking configs needs a CUDA device")
    shapes = SUITE_SHAPES if not args.shapes else [
        tuning.int_tuple(parser, "--shapes", s.replace("x", ","), 3) for s in args.shapes.split(",")]
    picks, timings = tune(shapes, args.precisions.split(","), args.rounds)
    if args.write:
        write(picks)
    tuning.save(timings, args.out)


if __name__ == "__main__":
    main()
