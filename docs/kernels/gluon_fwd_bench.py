"""Check and time the Gluon Hopper attention forward (kernels/flash_attention_gluon.py, issue 47).

    python docs/kernels/gluon_fwd_bench.py [--out DIR]   # on an H100/H200 (docs/kernels/gluon_fwd_device.sh)
    python docs/kernels/gluon_fwd_bench.py --compile-only  # no GPU: sm_90a cubins, registers, spills

On the device each (head dim, causal) case runs in a child process under a time limit, so that a
kernel that hangs (a barrier protocol bug) or fails to compile costs that case only. A child writes
one JSON line per finished step (accuracy at each shape, each timing) as it goes; the parent reads
them, prints a table and writes ``results.json`` under ``--out``.

Accuracy: o against float32 SDPA of the same inputs (max abs error; SDPA in bf16 and the Triton
forward beside it for scale), lse against the Triton forward's (both base 2), NaN counts, and at the
small shape the Triton backward run from the Gluon forward's (o, lse) against the same backward run
from the Triton forward's (max abs difference of dq, dk, dv). Timing: triton.testing.do_bench
(median, L2 cleared before each call), TFLOP/s = 4*B*H*N^2*D (halved when causal) / time.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CHECK_SHAPES = ((2, 4, 1024), (4, 16, 4096))
TIME_SHAPE = (4, 16, 4096)
HEAD_DIMS = (64, 128)
CHILD_TIMEOUT_S = 90
TOTAL_BUDGET_S = 230  # cases not started by then are skipped (the lead's run stays near 4 minutes)
ERROR_LINES = 8
GLUON_VARIANTS = {"gluon": False, "gluon_pp": True}  # impl name -> ping-pong


def _emit(record: dict) -> None:
    print("RECORD " + json.dumps(record), flush=True)


def _error_head(exc: BaseException) -> str:
    lines = [line for line in "".join(traceback.format_exception(exc)).splitlines() if line.strip()]
    head = [line for line in lines if not line.startswith("  ")]  # the messages, without the frames
    return "\n".join((head or lines)[-ERROR_LINES:])


def _flops(shape, head_dim: int, causal: bool) -> float:
    B, H, N = shape
    return 4 * B * H * N * N * head_dim / (2 if causal else 1)


# ----------------------------------------------------------------------------------------------
# child: one (head dim, causal) case
# ----------------------------------------------------------------------------------------------
def run_case(head_dim: int, causal: bool) -> None:
    import torch
    import torch.nn.functional as F
    import triton.testing
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kernels import flash_attention as fa
    from kernels import flash_attention_gluon as fg

    dtype = torch.bfloat16
    scale = 1.0 / math.sqrt(head_dim)
    case = dict(D=head_dim, causal=causal, dtype="bf16")

    def inputs(shape):
        return fa.make_inputs((*shape, head_dim), dtype, "cuda")

    def gluon(pingpong):
        return lambda q, k, v: fg.forward(q, k, v, causal, scale, pingpong=pingpong)

    def triton_fwd(q, k, v):
        return fa.triton_forward(q, k, v, causal, scale)

    def cudnn(q, k, v):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    for shape in CHECK_SHAPES:
        q, k, v = inputs(shape)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        o_tri, lse_tri = triton_fwd(q, k, v)
        o_sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        base = dict(case, step="check", shape=list(shape), supported=fg.supported(q, causal),
                    triton_err=(o_tri.float() - ref).abs().max().item(),
                    sdpa_bf16_err=(o_sdpa.float() - ref).abs().max().item())
        for name, pingpong in GLUON_VARIANTS.items():
            record = dict(base, impl=name)
            try:
                o, lse = gluon(pingpong)(q, k, v)
                torch.cuda.synchronize()
                record.update(o_err=(o.float() - ref).abs().max().item(),
                              lse_err=(lse - lse_tri).abs().max().item(),
                              o_nans=int(o.isnan().sum().item()), lse_nans=int(lse.isnan().sum().item()))
                if shape == CHECK_SHAPES[0]:
                    do = fa.make_grad_output((*shape, head_dim), dtype, "cuda")
                    grads = fa.triton_backward(q, k, v, o, lse, do, causal, scale)
                    grads_tri = fa.triton_backward(q, k, v, o_tri, lse_tri, do, causal, scale)
                    record["bwd_diff"] = max((a.float() - b.float()).abs().max().item()
                                             for a, b in zip(grads, grads_tri))
            except Exception as exc:  # one variant's failure must not end the case
                record["error"] = _error_head(exc)
            _emit(record)
        del q, k, v, ref, o_tri, lse_tri, o_sdpa
        torch.cuda.empty_cache()

    q, k, v = inputs(TIME_SHAPE)
    impls = {name: gluon(pp) for name, pp in GLUON_VARIANTS.items()}
    impls.update(triton=triton_fwd, cudnn=cudnn)
    for name, fn in impls.items():
        record = dict(case, step="time", shape=list(TIME_SHAPE), impl=name)
        try:
            ms = triton.testing.do_bench(lambda: fn(q, k, v), warmup=25, rep=200, return_mode="median")
            record.update(ms=ms, tflops=_flops(TIME_SHAPE, head_dim, causal) / ms * 1e-9)
        except Exception as exc:
            record["error"] = _error_head(exc)
        _emit(record)


# ----------------------------------------------------------------------------------------------
# parent
# ----------------------------------------------------------------------------------------------
def run_child(head_dim: int, causal: bool) -> tuple[list[dict], str | None]:
    return child_case(__file__, head_dim, causal, CHILD_TIMEOUT_S, ERROR_LINES)


def child_case(script: str, head_dim: int, causal: bool, timeout_s: float,
               error_lines: int) -> tuple[list[dict], str | None]:
    """One case of `script` (its --case) in a child process: its records, and why it ended early
    (a time-out, a crash: the last `error_lines` of its stderr) or None."""
    cmd = [sys.executable, script, "--case", str(head_dim), str(int(causal))]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
        out, err, problem = proc.stdout, proc.stderr, None
        if proc.returncode != 0:
            problem = f"exit {proc.returncode}: " + "\n".join(err.strip().splitlines()[-error_lines:])
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        problem = f"timed out after {timeout_s} s (a hang?) at the step after the last record"
    records = [json.loads(line[len("RECORD "):]) for line in out.splitlines() if line.startswith("RECORD ")]
    print(f"case D{head_dim} {'causal' if causal else 'full'}: {len(records)} records in "
          f"{time.monotonic() - start:.0f} s" + (f"; {problem}" if problem else ""), flush=True)
    for record in records:
        if "error" in record:
            print(f"  {record['impl']} {record['step']} {record['shape']} FAILED:\n    "
                  + record["error"].replace("\n", "\n    "), flush=True)
    return records, problem


def print_tables(records: list[dict]) -> None:
    print("\naccuracy (bf16; max abs error of o against float32 SDPA; lse against the Triton forward's)")
    print(f"{'case':<14}{'shape':<14}{'impl':<10}{'o err':>9}{'triton':>9}{'sdpa bf16':>10}{'lse err':>10}"
          f"{'NaNs':>6}{'bwd diff':>10}")
    for r in (r for r in records if r["step"] == "check"):
        case = f"D{r['D']} {'causal' if r['causal'] else 'full'}"
        shape = "x".join(map(str, r["shape"]))
        if "error" in r:
            print(f"{case:<14}{shape:<14}{r['impl']:<10} FAILED ({r['error'].splitlines()[-1][:60]})")
            continue
        bwd = f"{r['bwd_diff']:.2e}" if "bwd_diff" in r else ""
        print(f"{case:<14}{shape:<14}{r['impl']:<10}{r['o_err']:>9.2e}{r['triton_err']:>9.2e}"
              f"{r['sdpa_bf16_err']:>10.2e}{r['lse_err']:>10.2e}{r['o_nans'] + r['lse_nans']:>6}{bwd:>10}")
    shape = "x".join(map(str, TIME_SHAPE))
    print(f"\nforward TFLOP/s at {shape} bf16 (do_bench median, L2 cleared)")
    impls = list(GLUON_VARIANTS) + ["triton", "cudnn"]
    print(f"{'case':<14}" + "".join(f"{name:>12}" for name in impls) + f"{'best/cudnn':>12}")
    for head_dim in HEAD_DIMS:
        for causal in (False, True):
            row = {r["impl"]: r for r in records
                   if r["step"] == "time" and r["D"] == head_dim and r["causal"] == causal}
            cells = [f"{row[n]['tflops']:.1f}" if n in row and "tflops" in row[n] else
                     ("error" if n in row else "-") for n in impls]
            gluon_best = max((row[n]["tflops"] for n in GLUON_VARIANTS if "tflops" in row.get(n, {})), default=None)
            ratio = (f"{gluon_best / row['cudnn']['tflops']:.2f}" if gluon_best and "tflops" in row.get("cudnn", {})
                     else "-")
            print(f"{'D%d %s' % (head_dim, 'causal' if causal else 'full'):<14}"
                  + "".join(f"{c:>12}" for c in cells) + f"{ratio:>12}")


def environment() -> dict:
    import torch
    import triton

    return dict(torch=torch.__version__, triton=triton.__version__, gpu=torch.cuda.get_device_name(),
                capability=list(torch.cuda.get_device_capability()), date=time.strftime("%Y-%m-%d %H:%M:%S"))


def run_cases(out: Path, run_child, print_tables, budget_s: float) -> int:
    """Every (head dim, causal) case in a child process (`run_child`), `results.json` under `out`
    rewritten after each, cases not started within `budget_s` skipped; then `print_tables`."""
    env = environment()
    print(env, flush=True)
    out.mkdir(parents=True, exist_ok=True)
    records, problems = [], {}
    start = time.monotonic()
    for head_dim in HEAD_DIMS:
        for causal in (False, True):
            name = f"D{head_dim} {'causal' if causal else 'full'}"
            if time.monotonic() - start > budget_s:
                problems[name] = "skipped: the run's time budget was spent"
                print(f"case {name}: {problems[name]}", flush=True)
                continue
            case_records, problem = run_child(head_dim, causal)
            records += case_records
            if problem:
                problems[name] = problem
            # written after every case, so that a run stopped from outside keeps what it measured
            (out / "results.json").write_text(json.dumps(dict(env=env, records=records, problems=problems),
                                                         indent=1))
    print_tables(records)
    print(f"\nwrote {out / 'results.json'}")
    return 0


def main_device(out: Path) -> int:
    return run_cases(out, run_child, print_tables, TOTAL_BUDGET_S)


# ----------------------------------------------------------------------------------------------
# compile only (no GPU)
# ----------------------------------------------------------------------------------------------
COMPILED_HEADER = f"{'smem B':>8}{'ptxas regs':>11}{'spill st/ld':>13}{'max reg':>9}{'HGMMA':>7}{'warps':>7}"


def compiled_line(kernel, stem: Path) -> str:
    """One table row (COMPILED_HEADER) of a compiled kernel, its ptx and cubin written beside ``stem``."""
    import re

    import triton

    bin_dir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    stem.with_suffix(".ptx").write_text(kernel.asm["ptx"])
    stem.with_suffix(".cubin").write_bytes(kernel.asm["cubin"])
    ptxas = subprocess.run([str(bin_dir / "ptxas"), "-v", "--gpu-name", "sm_90a", str(stem.with_suffix(".ptx")),
                            "-o", os.devnull], capture_output=True, text=True).stderr
    regs = re.search(r"Used (\d+) registers", ptxas)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", ptxas)
    sass = subprocess.run([str(bin_dir / "nvdisasm"), "-c", str(stem.with_suffix(".cubin"))],
                          capture_output=True, text=True).stdout
    max_reg = max((int(r) for r in re.findall(r"\bR(\d+)\b", sass)), default=-1)
    return (f"{kernel.metadata.shared:>8}{regs.group(1) if regs else '?':>11}"
            f"{(spills.group(1) + '/' + spills.group(2)) if spills else '?':>13}{max_reg + 1:>9}"
            f"{sass.count('HGMMA'):>7}{kernel.metadata.num_warps:>7}")


def main_compile_only(out: Path) -> int:
    """sm_90a cubins of every case: shared memory (Triton's metadata), ptxas's registers and spills
    (the launch bound: setmaxnreg raises the consumers to CONSUMER_REGS) and the highest register
    the SASS names (what the busiest partition needs)."""
    import torch
    import triton

    from kernels import flash_attention_gluon as fg

    out.mkdir(parents=True, exist_ok=True)
    print(f"triton {triton.__version__}; consumer/loader setmaxnreg {fg.CONSUMER_REGS}/{fg.LOADER_REGS}")
    print(f"{'case':<26}" + COMPILED_HEADER)
    failures = 0
    for head_dim in HEAD_DIMS:
        for causal in (False, True):
            for dtype in (torch.bfloat16, torch.float16):
                for pingpong in (False, True):
                    name = (f"D{head_dim} {'causal' if causal else 'full'} {str(dtype)[6:]}"
                            f"{' pp' if pingpong else ''}")
                    try:
                        kernel = fg.compile_only(head_dim, causal, dtype, pingpong)
                    except Exception as exc:
                        failures += 1
                        print(f"{name:<26} FAILED: {_error_head(exc)}")
                        continue
                    print(f"{name:<26}" + compiled_line(kernel, out / name.replace(" ", "_")))
    return 1 if failures else 0


def cli(doc: str, default_out: str, run_case, main_compile_only, main_device) -> int:
    """The bench's command line: --out, --compile-only, and --case (a child's one case)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", default_out)))
    parser.add_argument("--compile-only", action="store_true", help="no GPU: compile for sm_90a and report")
    parser.add_argument("--case", nargs=2, type=int, metavar=("HEAD_DIM", "CAUSAL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        run_case(args.case[0], bool(args.case[1]))
        return 0
    if args.compile_only:
        return main_compile_only(args.out)
    return main_device(args.out)


def main() -> int:
    return cli(__doc__, "scratch/gluon_fwd", run_case, main_compile_only, main_device)


if __name__ == "__main__":
    sys.exit(main())
