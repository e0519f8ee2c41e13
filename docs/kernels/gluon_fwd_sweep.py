"""Sweep the Gluon Hopper attention forward's tiles on an H100/H200 (issue 47), and time its default
against the Triton kernel from N 1,024 to 16,384.

    python docs/kernels/gluon_fwd_sweep.py [--out DIR]   # on the device (gluon_fwd_device.sh sweep)
    python docs/kernels/gluon_fwd_sweep.py --compile-only  # no GPU: every variant's sm_90a registers

Variants (``VARIANTS``): ``flash_attention_gluon.Tiles`` changed from the head dim's default, timed at
B4 H16 N4096 bf16, full and causal, beside the default, the Triton kernel (``use_tma=True`` keeps
the Gluon one out) and SDPA cuDNN; each variant's o and lse are compared with the default's (max abs
difference, NaNs). Scaling (``SCALING_SHAPES``): the default, the Triton kernel and cuDNN at N
1,024..16,384 with B*N constant, D64/D128, full and causal.

Wall time: every kernel is first compiled and run once by ``WARM_WORKERS`` child processes in
parallel (Gluon compiles take seconds each; Triton's disk cache hands the binaries to the timing
children); variants that fail or hang there are not timed. The timing children (one per sweep case,
one for the scaling) each run under a time limit. Timing: triton.testing.do_bench (median, L2
cleared), TFLOP/s = 4*B*H*N^2*D (halved when causal) / time. Writes ``sweep.json`` under ``--out``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from gluon_fwd_bench import COMPILED_HEADER, _emit, _error_head, _flops, compiled_line, environment  # noqa: E402

SWEEP_SHAPE = (4, 16, 4096)
SCALING_SHAPES = ((16, 16, 1024), (8, 16, 2048), (2, 16, 8192), (1, 16, 16384))
#: per head dim: variant name -> changes to ``default_tiles(D)``. D64: stages, key tiles of 64 (256
#: spills: S alone takes 128 registers a thread),
#: FA3's three 64-row consumers (M=192; 160 registers each so that 3*128*160 + 128*24 <= 64K), two
#: 64-row wgmma tiles per consumer (block_m 128), ping-pong. D128: the few that leave its registers.
VARIANTS = {
    64: {
        "pp": dict(pingpong=True),
        "st2": dict(stages=2),
        "st4": dict(stages=4),
        "n64 st4": dict(block_n=64, stages=4),
        "n64 st6": dict(block_n=64, stages=6),
        "c3 st3": dict(consumers=3, consumer_regs=160),
        "c3 st2": dict(consumers=3, consumer_regs=160, stages=2),
        "c3 st4": dict(consumers=3, consumer_regs=160, stages=4),
        "c3 st3 pp": dict(consumers=3, consumer_regs=160, pingpong=True),
        "c3 n64 st4": dict(consumers=3, consumer_regs=160, block_n=64, stages=4),
        "m128 n64 st4": dict(block_m=128, block_n=64, stages=4),
        "m128 n64 st4 pp": dict(block_m=128, block_n=64, stages=4, pingpong=True),
        "regs 232/40": dict(consumer_regs=232, loader_regs=40),
    },
    128: {
        "n64 st3": dict(block_n=64, stages=3),
        "n64 st4": dict(block_n=64, stages=4),
        "c3 n64 st4": dict(consumers=3, consumer_regs=160, block_n=64, stages=4),
    },
}
DEFAULT = "default"
SWEEP_CASES = ((64, False), (64, True), (128, False), (128, True))
SCALING_DIMS = (64, 128)
WARM_WORKERS = 12
WARM_TIMEOUT_S = 75
CHILD_TIMEOUT_S = 60
TOTAL_BUDGET_S = 140  # timing children not started by then are skipped
BENCH = dict(warmup=20, rep=80, return_mode="median")  # do_bench, milliseconds


@dataclasses.dataclass(frozen=True)
class Unit:
    """One kernel at one shape: ``impl`` gluon (with ``variant``), triton or cudnn."""
    head_dim: int
    causal: bool
    shape: tuple[int, int, int]
    impl: str
    variant: str = ""

    @property
    def label(self) -> str:
        return self.variant if self.impl == "gluon" else self.impl


def tiles_of(head_dim: int, variant: str):
    from kernels import flash_attention_gluon as fg

    base = fg.default_tiles(head_dim)
    return base if variant == DEFAULT else dataclasses.replace(base, **VARIANTS[head_dim][variant])


def sweep_units(head_dim: int, causal: bool) -> list[Unit]:
    gluon = [Unit(head_dim, causal, SWEEP_SHAPE, "gluon", v) for v in (DEFAULT, *VARIANTS[head_dim])]
    return gluon + [Unit(head_dim, causal, SWEEP_SHAPE, impl) for impl in ("triton", "cudnn")]


def scaling_units() -> list[Unit]:
    return [Unit(d, causal, shape, impl, DEFAULT if impl == "gluon" else "")
            for shape in SCALING_SHAPES for d in SCALING_DIMS for causal in (False, True)
            for impl in ("gluon", "triton", "cudnn")]


def all_units() -> list[Unit]:
    return [u for case in SWEEP_CASES for u in sweep_units(*case)] + scaling_units()


# ----------------------------------------------------------------------------------------------
# children
# ----------------------------------------------------------------------------------------------
def runner(unit: Unit):
    """A callable of (q, k, v) -> o, or (o, lse) for the Gluon and Triton kernels."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kernels import flash_attention as fa
    from kernels import flash_attention_gluon as fg

    scale = unit.head_dim ** -0.5
    if unit.impl == "gluon":
        tiles = tiles_of(unit.head_dim, unit.variant)
        return lambda q, k, v: fg.forward(q, k, v, unit.causal, scale, tiles=tiles)
    if unit.impl == "triton":
        return lambda q, k, v: fa.triton_forward(q, k, v, unit.causal, scale, use_tma=True)

    def cudnn(q, k, v):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=unit.causal, scale=scale)
    return cudnn


def inputs(unit: Unit, batch_heads: tuple[int, int] | None = None):
    import torch

    from kernels import flash_attention as fa

    B, H, N = unit.shape
    if batch_heads:
        B, H = batch_heads
    return fa.make_inputs((B, H, N, unit.head_dim), torch.bfloat16, "cuda")


def run_warm(indices: list[int]) -> None:
    """Compile and run each unit once (one head at its N: the same binaries as the full shape's; the
    Triton kernel at its full shape, whose launch table reads B*H)."""
    import torch

    units = all_units()
    for i in indices:
        unit = units[i]
        start = time.monotonic()
        record = dict(step="warm", index=i)
        try:
            q, k, v = inputs(unit, None if unit.impl == "triton" else (1, 1))
            runner(unit)(q, k, v)
            torch.cuda.synchronize()
            record["s"] = round(time.monotonic() - start, 2)
        except Exception as exc:
            record["error"] = _error_head(exc)
        _emit(record)


def _out(result):
    return result if not isinstance(result, tuple) else result[0]


def run_time(indices: list[int]) -> None:
    """Check and time the units; each gluon variant against the first unit of its (D, causal, shape),
    a gluon one (the default), and every unit's o against that too."""
    import torch
    import triton.testing

    units = all_units()
    refs: dict[tuple, tuple] = {}
    current = None
    for i in indices:
        unit = units[i]
        key = (unit.head_dim, unit.causal, unit.shape)
        if key != current:
            current = key
            q, k, v = inputs(unit)
            refs.clear()
        record = dict(step="time", index=i)
        try:
            fn = runner(unit)
            result = fn(q, k, v)
            torch.cuda.synchronize()
            o = _out(result)
            record["nans"] = int(o.isnan().sum().item())
            if key not in refs:
                refs[key] = result if isinstance(result, tuple) else (o, None)
            else:
                ref_o, ref_lse = refs[key]
                record["o_diff"] = (o.float() - ref_o.float()).abs().max().item()
                if isinstance(result, tuple) and ref_lse is not None:
                    record["lse_diff"] = (result[1] - ref_lse).abs().max().item()
            del result, o
            ms = triton.testing.do_bench(lambda: fn(q, k, v), **BENCH)
            record.update(ms=ms, tflops=_flops(unit.shape, unit.head_dim, unit.causal) / ms * 1e-9)
        except Exception as exc:  # one unit's failure must not end the case
            record["error"] = _error_head(exc)
        _emit(record)


# ----------------------------------------------------------------------------------------------
# parent
# ----------------------------------------------------------------------------------------------
def spawn(flag: str, indices: list[int]) -> subprocess.Popen:
    cmd = [sys.executable, __file__, flag, ",".join(map(str, indices))]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def collect(proc: subprocess.Popen, timeout: float) -> tuple[list[dict], str | None]:
    """The child's records, and why it ended early (a time-out: a hang?, a crash) or None."""
    try:
        out, err = proc.communicate(timeout=max(timeout, 1))
        problem = None if proc.returncode == 0 else (
            f"exit {proc.returncode}: " + " | ".join(err.strip().splitlines()[-2:]))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        problem = "timed out (a hang?) at the unit after its last record"
    records = [json.loads(line[len("RECORD "):]) for line in out.splitlines() if line.startswith("RECORD ")]
    return records, problem


def warm_all(units: list[Unit], start: float) -> dict[int, dict]:
    """Warm-up records by unit index; a unit a child never reached gets an error record."""
    # cuDNN compiles nothing that outlives its process; the slow Gluon compiles go first
    warm: dict[int, dict] = {i: dict(step="warm", index=i) for i, u in enumerate(units) if u.impl == "cudnn"}
    order = sorted((i for i in range(len(units)) if i not in warm), key=lambda i: units[i].impl != "gluon")
    chunks = [order[w::WARM_WORKERS] for w in range(WARM_WORKERS)]
    procs = [(chunk, spawn("--warm", chunk)) for chunk in chunks if chunk]
    for chunk, proc in procs:
        records, problem = collect(proc, WARM_TIMEOUT_S - (time.monotonic() - start))
        warm.update((r["index"], r) for r in records)
        for i in chunk:
            if i not in warm:
                warm[i] = dict(step="warm", index=i, error=problem or "no record")
                problem = "not reached: an earlier unit of its child failed"
    for i, r in sorted(warm.items()):
        if "error" in r:
            u = units[i]
            print(f"  warm-up FAILED: D{u.head_dim} {'causal' if u.causal else 'full'} {u.label}: "
                  + " | ".join(r["error"].splitlines()[-2:])[:300], flush=True)
    return warm


def describe(unit: Unit) -> str:
    if unit.impl != "gluon":
        return ""
    t = tiles_of(unit.head_dim, unit.variant)
    return (f"m{t.block_m}x{t.consumers} n{t.block_n} st{t.stages}{' pp' if t.pingpong else ''} "
            f"r{t.consumer_regs}/{t.loader_regs}")


def print_tables(units: list[Unit], timed: dict[int, dict]) -> None:
    for head_dim, causal in SWEEP_CASES:
        rows = [(units[i], r) for i, r in timed.items()
                if units[i].shape == SWEEP_SHAPE and (units[i].head_dim, units[i].causal) == (head_dim, causal)]
        if not rows:
            continue
        cudnn = next((r.get("tflops") for u, r in rows if u.impl == "cudnn"), None)
        print(f"\nD{head_dim} {'causal' if causal else 'full'} B{SWEEP_SHAPE[0]} H{SWEEP_SHAPE[1]} N{SWEEP_SHAPE[2]}"
              " bf16 forward, sorted by TFLOP/s (diffs against the default's o, lse)")
        print(f"{'variant':<18}{'tiles':<32}{'TFLOP/s':>9}{'/cudnn':>8}{'o diff':>10}{'lse diff':>10}{'NaNs':>6}")
        for u, r in sorted(rows, key=lambda ur: -ur[1].get("tflops", -1.0)):
            if "error" in r:
                print(f"{u.label:<18}{describe(u):<32} FAILED: " + r["error"].splitlines()[-1][:70])
                continue
            ratio = f"{r['tflops'] / cudnn:.3f}" if cudnn else "-"
            diffs = "".join(f"{r[k]:>10.2e}" if k in r else f"{'':>10}" for k in ("o_diff", "lse_diff"))
            print(f"{u.label:<18}{describe(u):<32}{r['tflops']:>9.1f}{ratio:>8}{diffs}{r['nans']:>6}")
    print("\nscaling: default Gluon vs the Triton kernel and cuDNN, TFLOP/s (o diff: Triton's against Gluon's)")
    print(f"{'case':<12}{'shape':<14}{'gluon':>9}{'triton':>9}{'cudnn':>9}{'g/triton':>10}{'g/cudnn':>9}"
          f"{'o diff':>10}{'NaNs':>6}")
    for shape in (*SCALING_SHAPES[:2], SWEEP_SHAPE, *SCALING_SHAPES[2:]):
        for head_dim in SCALING_DIMS:
            for causal in (False, True):
                row = {units[i].impl: r for i, r in timed.items()
                       if (units[i].head_dim, units[i].causal, units[i].shape) == (head_dim, causal, shape)
                       and units[i].label in (DEFAULT, "triton", "cudnn")}
                if not row:
                    continue
                tf = {impl: row[impl].get("tflops") if impl in row else None for impl in ("gluon", "triton", "cudnn")}
                cells = "".join(f"{tf[i]:>9.1f}" if tf[i] else f"{'-':>9}" for i in tf)
                g_t = f"{tf['gluon'] / tf['triton']:.3f}" if tf["gluon"] and tf["triton"] else "-"
                g_c = f"{tf['gluon'] / tf['cudnn']:.3f}" if tf["gluon"] and tf["cudnn"] else "-"
                diff = row.get("triton", {}).get("o_diff")
                nans = sum(r.get("nans", 0) for r in row.values())
                flag = "  SLOWER than triton" if tf["gluon"] and tf["triton"] and tf["gluon"] < tf["triton"] else ""
                print(f"{'D%d %s' % (head_dim, 'causal' if causal else 'full'):<12}{'x'.join(map(str, shape)):<14}"
                      f"{cells}{g_t:>10}{g_c:>9}{(f'{diff:.2e}' if diff is not None else '-'):>10}{nans:>6}{flag}")


def main_device(out: Path) -> int:
    start = time.monotonic()
    env = environment()
    print(env, flush=True)
    out.mkdir(parents=True, exist_ok=True)
    units = all_units()
    warm = warm_all(units, start)
    print(f"warm-up: {sum('error' not in r for r in warm.values())}/{len(units)} units compiled and ran in "
          f"{time.monotonic() - start:.0f} s", flush=True)
    groups = [[i for i, u in enumerate(units) if u.shape == SWEEP_SHAPE and (u.head_dim, u.causal) == case]
              for case in SWEEP_CASES]
    groups.append([i for i, u in enumerate(units) if u.shape != SWEEP_SHAPE])
    timed: dict[int, dict] = {}
    problems: list[str] = []
    for group in groups:
        group = [i for i in group if "error" not in warm.get(i, {"error": ""})]
        if not group:
            continue
        if time.monotonic() - start > TOTAL_BUDGET_S:
            problems.append(f"skipped {len(group)} units: the time budget was spent")
            continue
        t0 = time.monotonic()
        records, problem = collect(spawn("--time", group), CHILD_TIMEOUT_S)
        timed.update((r["index"], r) for r in records)
        print(f"timed {len(records)}/{len(group)} units in {time.monotonic() - t0:.0f} s"
              + (f"; {problem}" if problem else ""), flush=True)
        if problem:
            problems.append(problem)
        payload = dict(env=env, problems=problems,
                       units=[dict(dataclasses.asdict(u), tiles=describe(u), warm=warm.get(i), result=timed.get(i))
                              for i, u in enumerate(units)])
        (out / "sweep.json").write_text(json.dumps(payload, indent=1))
    print_tables(units, timed)
    print(f"\nwrote {out / 'sweep.json'} after {time.monotonic() - start:.0f} s")
    return 0


def main_compile_only(out: Path) -> int:
    """Every swept Gluon variant compiled for sm_90a (ptxas registers, spills, shared memory)."""
    import triton

    from kernels import flash_attention_gluon as fg

    out.mkdir(parents=True, exist_ok=True)
    print(f"triton {triton.__version__}; max reg: the highest register any partition names")
    print(f"{'case':<34}{'tiles':<32}" + COMPILED_HEADER)
    failures = 0
    for head_dim, causal in SWEEP_CASES:
        for unit in sweep_units(head_dim, causal):
            if unit.impl != "gluon":
                continue
            name = f"D{head_dim} {'causal' if causal else 'full'} {unit.variant}"
            tiles = tiles_of(head_dim, unit.variant)
            problem = tiles.problem(head_dim) or (None if tiles.takes(unit.shape[2]) else "N does not fit")
            try:
                if problem:
                    raise ValueError(problem)
                kernel = fg.compile_only(head_dim, causal, tiles=tiles)
                print(f"{name:<34}{describe(unit):<32}"
                      + compiled_line(kernel, out / name.replace(" ", "_").replace("/", "-")), flush=True)
            except Exception as exc:
                failures += 1
                print(f"{name:<34}{describe(unit):<32} FAILED: " + " | ".join(_error_head(exc).splitlines()[-2:]))
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "scratch/gluon_sweep")))
    parser.add_argument("--compile-only", action="store_true", help="no GPU: compile every variant for sm_90a")
    parser.add_argument("--warm", help=argparse.SUPPRESS)
    parser.add_argument("--time", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warm:
        run_warm([int(i) for i in args.warm.split(",")])
        return 0
    if args.time:
        run_time([int(i) for i in args.time.split(",")])
        return 0
    if args.compile_only:
        return main_compile_only(args.out)
    return main_device(args.out)


if __name__ == "__main__":
    sys.exit(main())
