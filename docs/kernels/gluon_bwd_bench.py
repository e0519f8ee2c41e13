"""Check and time the Gluon Hopper attention backward (kernels/flash_attention_gluon_bwd.py, issue 47).

    python docs/kernels/gluon_bwd_bench.py [--out DIR]   # on an H100/H200 (docs/kernels/gluon_bwd_device.sh)
    python docs/kernels/gluon_bwd_bench.py --compile-only  # no GPU: sm_90a cubins, registers, spills

As gluon_fwd_bench.py: each (head dim, causal) case runs in a child process under a time limit (a
barrier bug that hangs, or a compile error, costs that case only; an error prints its last two
lines), writing one JSON line per finished step; the parent prints tables and writes
``results.json`` under ``--out``.

Accuracy (bf16): dq, dk, dv of the Gluon backward (each of GLUON_VARIANTS) against the Triton kernel
(``flash_attention.triton_backward`` with its variant named) on the same forward's (o, lse): max abs
difference and NaN counts, at B2 H4 N1024 and B4 H16 N4096; at the small shape also both against
float32 SDPA autograd (max abs error). Timing at B4 H16 N4096 and N 1,024 to 16,384 (B*N = 16,384): the whole backward of each (delta
preprocess, dQ accumulator and cast included), cuDNN as SDPA's backward alone (torch.autograd.grad
with retain_graph under sdpa_kernel(CUDNN_ATTENTION)); triton.testing.do_bench median, L2 cleared;
TFLOP/s = 2.5 * 4*B*H*N^2*D (halved when causal) / time.
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gluon_fwd_bench import COMPILED_HEADER, child_case, cli, compiled_line, run_cases  # noqa: E402

CHECK_SHAPES = ((2, 4, 1024), (4, 16, 4096))
TIME_SHAPE = (4, 16, 4096)
#: the scaling check (issue 47: no N of 1,024 to 16,384 slower than the Triton backward), B*N constant
SCALING_SHAPES = ((16, 16, 1024), (8, 16, 2048), (2, 16, 8192), (1, 16, 16384))
HEAD_DIMS = (64, 128)
CHILD_TIMEOUT_S = 150
TOTAL_BUDGET_S = 400  # cases not started by then are skipped (the run stays near 7 minutes)
ERROR_LINES = 2
BACKWARD_FLOPS = 2.5  # the backward's matmuls against the forward's two
GRADS = ("dq", "dk", "dv")
#: impl name -> changes to ``first_tiles`` (``dataclasses.replace``); a variant that cannot run a head dim
#: reports its ``Tiles.problem`` as its error. The defaults (``DEFAULT_TILES``) are "shared" at D128
#: and "shared_m128" at D64.
GLUON_VARIANTS = {"gluon": {}, "shared": dict(dq_shared=True, dq_split=1),
                  "shared_a": dict(dq_shared=True, dq_split=1, dk_smem_a=True),
                  "shared_s3": dict(dq_shared=True, dq_split=1, stages=3),
                  "shared_m128": dict(dq_shared=True, dq_split=1, block_m=128, stages=2)}
TIMED = tuple(GLUON_VARIANTS) + ("triton", "cudnn")


def first_tiles(head_dim: int):
    """The kernel's first tiles (each consumer adds its own dQ partial), which GLUON_VARIANTS change."""
    from kernels.flash_attention_gluon_bwd import Tiles

    return {64: Tiles(64, 64, 3, 240, 24), 128: Tiles(64, 64, 2, 240, 24, dq_split=2)}[head_dim]


def _emit(record: dict) -> None:
    print("RECORD " + json.dumps(record), flush=True)


def _error_head(exc: BaseException) -> str:
    """The last ERROR_LINES message lines of an exception (no stack frames)."""
    lines = [line for line in "".join(traceback.format_exception(exc)).splitlines() if line.strip()]
    head = [line for line in lines if not line.startswith("  ")]
    return "\n".join((head or lines)[-ERROR_LINES:])


def _flops(shape, head_dim: int, causal: bool) -> float:
    B, H, N = shape
    return BACKWARD_FLOPS * 4 * B * H * N * N * head_dim / (2 if causal else 1)


def _max_diff(grads, reference) -> dict:
    return {name: (a.float() - b.float()).abs().max().item() for name, a, b in zip(GRADS, grads, reference)}


# ----------------------------------------------------------------------------------------------
# child: one (head dim, causal) case
# ----------------------------------------------------------------------------------------------
def run_case(head_dim: int, causal: bool) -> None:
    import torch
    import torch.nn.functional as F
    import triton.testing
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kernels import flash_attention as fa
    from kernels import flash_attention_gluon_bwd as gb

    dtype = torch.bfloat16
    scale = 1.0 / math.sqrt(head_dim)
    case = dict(D=head_dim, causal=causal, dtype="bf16")

    def gluon(changes):
        tiles = dataclasses.replace(first_tiles(head_dim), **changes)
        return lambda q, k, v, o, lse, do: gb.backward(q, k, v, o, lse, do, causal, scale, tiles=tiles)

    def triton_bwd(q, k, v, o, lse, do):  # a variant named: the Triton kernel, never the Gluon one
        return fa.triton_backward(q, k, v, o, lse, do, causal, scale, variant=fa.BWD_VARIANT)

    for shape in CHECK_SHAPES:
        q, k, v = fa.make_inputs((*shape, head_dim), dtype, "cuda")
        do = fa.make_grad_output((*shape, head_dim), dtype, "cuda")
        o, lse = fa.triton_forward(q, k, v, causal, scale)
        reference = triton_bwd(q, k, v, o, lse, do)
        base = dict(case, step="check", shape=list(shape), supported=gb.supported(q, causal))
        exact = None
        if shape == CHECK_SHAPES[0]:
            qf, kf, vf = (t.float().requires_grad_() for t in (q, k, v))
            out = F.scaled_dot_product_attention(qf, kf, vf, is_causal=causal)
            exact = torch.autograd.grad(out, (qf, kf, vf), do.float())
            base["triton_vs_fp32"] = _max_diff(reference, exact)
        for name, changes in GLUON_VARIANTS.items():
            record = dict(base, impl=name)
            try:
                grads = gluon(changes)(q, k, v, o, lse, do)
                torch.cuda.synchronize()
                record.update(diff=_max_diff(grads, reference),
                              nans={n: int(g.isnan().sum().item()) for n, g in zip(GRADS, grads)})
                if exact is not None:
                    record["vs_fp32"] = _max_diff(grads, exact)
            except Exception as exc:  # one variant's failure must not end the case
                record["error"] = _error_head(exc)
            _emit(record)
        del q, k, v, do, o, lse, reference, exact
        torch.cuda.empty_cache()

    impls = {name: gluon(changes) for name, changes in GLUON_VARIANTS.items()}
    impls["triton"] = triton_bwd
    for shape in (TIME_SHAPE, *SCALING_SHAPES):
        q, k, v = fa.make_inputs((*shape, head_dim), dtype, "cuda")
        do = fa.make_grad_output((*shape, head_dim), dtype, "cuda")
        o, lse = fa.triton_forward(q, k, v, causal, scale)
        step = "time" if shape == TIME_SHAPE else "scaling"
        for name, fn in impls.items():
            record = dict(case, step=step, shape=list(shape), impl=name)
            try:
                ms = triton.testing.do_bench(lambda: fn(q, k, v, o, lse, do), warmup=25, rep=200,
                                             return_mode="median")
                record.update(ms=ms, tflops=_flops(shape, head_dim, causal) / ms * 1e-9)
            except Exception as exc:
                record["error"] = _error_head(exc)
            _emit(record)
        record = dict(case, step=step, shape=list(shape), impl="cudnn")
        try:
            qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)

                def cudnn_bwd():
                    return torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True)

                ms = triton.testing.do_bench(cudnn_bwd, warmup=25, rep=200, return_mode="median")
            record.update(ms=ms, tflops=_flops(shape, head_dim, causal) / ms * 1e-9)
        except Exception as exc:
            record["error"] = _error_head(exc)
        _emit(record)
        del q, k, v, do, o, lse
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------------------
# parent
# ----------------------------------------------------------------------------------------------
def run_child(head_dim: int, causal: bool) -> tuple[list[dict], str | None]:
    return child_case(__file__, head_dim, causal, CHILD_TIMEOUT_S, ERROR_LINES)


def _case_name(record: dict) -> str:
    return f"D{record['D']} {'causal' if record['causal'] else 'full'}"


def print_tables(records: list[dict]) -> None:
    print("\naccuracy (bf16): max abs difference of dq / dk / dv from triton_backward; at the small shape "
          "also against float32 SDPA (triton's own error beside it)")
    print(f"{'case':<13}{'shape':<12}{'impl':<14}{'vs triton dq/dk/dv':>30}{'NaNs':>6}"
          f"{'vs fp32 dq/dk/dv':>30}{'triton vs fp32':>30}")

    def triple(d):
        return "/".join(f"{d[g]:.1e}" for g in GRADS) if d else ""

    for r in (r for r in records if r["step"] == "check"):
        shape = "x".join(map(str, r["shape"]))
        if "error" in r:
            print(f"{_case_name(r):<13}{shape:<12}{r['impl']:<14} FAILED ({r['error'].splitlines()[-1][:70]})")
            continue
        print(f"{_case_name(r):<13}{shape:<12}{r['impl']:<14}{triple(r['diff']):>30}{sum(r['nans'].values()):>6}"
              f"{triple(r.get('vs_fp32')):>30}{triple(r.get('triton_vs_fp32')):>30}")
    shape = "x".join(map(str, TIME_SHAPE))
    print(f"\nbackward TFLOP/s at {shape} bf16 (do_bench median, L2 cleared)")
    print(f"{'case':<14}" + "".join(f"{name:>14}" for name in TIMED) + f"{'gluon/cudnn':>13}{'gluon/triton':>13}")
    for head_dim in HEAD_DIMS:
        for causal in (False, True):
            row = {r["impl"]: r for r in records
                   if r["step"] == "time" and r["D"] == head_dim and r["causal"] == causal}
            cells = [f"{row[n]['tflops']:.1f}" if "tflops" in row.get(n, {}) else ("error" if n in row else "-")
                     for n in TIMED]
            best = max((row[n]["tflops"] for n in GLUON_VARIANTS if "tflops" in row.get(n, {})), default=None)

            def ratio(peer):
                return f"{best / row[peer]['tflops']:.2f}" if best and "tflops" in row.get(peer, {}) else "-"

            print(f"{'D%d %s' % (head_dim, 'causal' if causal else 'full'):<14}"
                  + "".join(f"{c:>14}" for c in cells) + f"{ratio('cudnn'):>13}{ratio('triton'):>13}")
    print("\nscaling: TFLOP/s of each Gluon variant / the Triton backward's, and the Triton backward's / cuDNN's")
    print(f"{'case':<14}{'shape':<13}" + "".join(f"{name:>13}" for name in GLUON_VARIANTS) + f"{'triton/cudnn':>13}")
    for r in (r for r in records if r["step"] in ("time", "scaling") and r["impl"] == "triton" and "tflops" in r):
        row = {x["impl"]: x.get("tflops") for x in records
               if x["step"] == r["step"] and x["shape"] == r["shape"] and x["D"] == r["D"] and x["causal"] == r["causal"]}
        cells = [f"{row[n] / r['tflops']:.2f}" if row.get(n) else "-" for n in GLUON_VARIANTS]
        cudnn = f"{r['tflops'] / row['cudnn']:.2f}" if row.get("cudnn") else "-"
        print(f"{_case_name(r):<14}{'x'.join(map(str, r['shape'])):<13}" + "".join(f"{c:>13}" for c in cells)
              + f"{cudnn:>13}")


def main_device(out: Path) -> int:
    return run_cases(out, run_child, print_tables, TOTAL_BUDGET_S)


# ----------------------------------------------------------------------------------------------
# compile only (no GPU)
# ----------------------------------------------------------------------------------------------
def main_compile_only(out: Path) -> int:
    """sm_90a cubins of every case and both dQ variants: shared memory, ptxas's registers and spills
    (the launch bound; setmaxnreg raises the consumers), the highest register the SASS names."""
    import torch
    import triton

    from kernels import flash_attention_gluon_bwd as gb

    out.mkdir(parents=True, exist_ok=True)
    print(f"triton {triton.__version__}")
    print(f"{'case':<28}" + COMPILED_HEADER)
    failures = 0
    for head_dim in HEAD_DIMS:
        for causal in (False, True):
            for dtype in (torch.bfloat16, torch.float16):
                for variant, changes in GLUON_VARIANTS.items():
                    tiles = dataclasses.replace(first_tiles(head_dim), **changes)
                    name = f"D{head_dim} {'causal' if causal else 'full'} {str(dtype)[6:]} {variant}"
                    problem = tiles.problem(head_dim)
                    if problem:
                        print(f"{name:<28} cannot run: {problem}")
                        continue
                    try:
                        kernel = gb.compile_only(head_dim, causal, dtype, tiles=tiles)
                    except Exception as exc:
                        failures += 1
                        print(f"{name:<28} FAILED: {_error_head(exc)}")
                        continue
                    print(f"{name:<28}" + compiled_line(kernel, out / name.replace(" ", "_")), flush=True)
    return 1 if failures else 0


def main() -> int:
    return cli(__doc__, "scratch/gluon_bwd", run_case, main_compile_only, main_device)


if __name__ == "__main__":
    sys.exit(main())
