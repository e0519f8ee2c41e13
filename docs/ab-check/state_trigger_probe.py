"""Which history puts a plain process's graph-timed calls in the state where they read as CUPTI's
durations (the steady-state self-check's process) rather than ~0.3 µs per kernel above them? PREP
names what runs before the measurements (comma-separated): big (the self-check's 256M-element fp32
and bf16 tensors, ~4.5 GiB, by randn and empty), ones16 (16 GiB by torch.ones), triton (import
triton.testing), dobench (do_bench of a small fill), stream (what follows runs on a stream of its own, not
the legacy default stream), measure (a harness measurement of a row sum), empty16 (16 GiB by torch.empty: no kernel touches it),
side16 (16 GiB by torch.ones on a side stream), ones5 (one 5 GiB tensor), four4 (four 4 GiB tensors),
gib16 (16 tensors of 1 GiB by torch.ones), read16 (16 GiB by torch.empty, summed: read, never
written), elu64 (the float64 reference of ELU on 16384x16384 fp32, as a suite test checks it). Each line also
prints an empty kernel's time per graph node from the legacy stream and from a stream of its own
((graph of 100 - graph of 50) / 50, events) against CUPTI's duration, and the kernel nodes that
CUDAGraph.debug_dump shows in the four-kernel call's graph."""
import os
import statistics

import graph_nodes
import torch
import torch.nn.functional as F

from pytest_gpuperf.measure.measurement import TimingConfig
from pytest_gpuperf.measure.profile import calls_of, op_names, profiled_ops
from pytest_gpuperf.measure.timer import measure

PREP = [p for p in os.environ.get("PREP", "").split(",") if p]
keep = []
y_early = torch.empty(4096, device="cuda")  # allocated before the history: fill-4K-early
for step in PREP:
    if step == "big":
        for dt in (torch.float32, torch.bfloat16):
            keep += [torch.randn(1 << 28, device="cuda", dtype=dt), torch.empty(1 << 28, device="cuda", dtype=dt),
                     torch.randn(1 << 28, device="cuda", dtype=dt)]
    elif step == "ones16":
        keep.append(torch.ones(16 << 30, dtype=torch.uint8, device="cuda"))
    elif step == "triton":
        import triton.testing  # noqa: F401
    elif step == "dobench":
        from triton.testing import do_bench
        z = torch.empty(4096, device="cuda")
        do_bench(lambda: z.fill_(1.0))
    elif step == "stream":  # the rest runs on a stream of its own, as tests under --gpuperf do
        torch.cuda.set_stream(torch.cuda.Stream())
    elif step == "empty16":
        keep.append(torch.empty(16 << 30, dtype=torch.uint8, device="cuda"))
    elif step == "side16":
        with torch.cuda.stream(torch.cuda.Stream()):
            keep.append(torch.ones(16 << 30, dtype=torch.uint8, device="cuda"))
    elif step == "ones5":
        keep.append(torch.ones(5 << 30, dtype=torch.uint8, device="cuda"))
    elif step == "gib16":
        keep += [torch.ones(1 << 30, dtype=torch.uint8, device="cuda") for _ in range(16)]
    elif step == "read16":
        keep.append(torch.empty(16 << 30, dtype=torch.uint8, device="cuda"))
        keep[-1].view(torch.int64).sum()
    elif step == "four4":
        keep += [torch.ones(4 << 30, dtype=torch.uint8, device="cuda") for _ in range(4)]
    elif step == "elu64":
        import sys
        sys.path.insert(0, ".")
        from kernels import elu
        big = torch.randn(16384, 16384, device="cuda")
        elu.reference(big)
        del big
    elif step == "measure":
        s = torch.randn(1 << 12, device="cuda")
        measure(lambda: s.view(-1, 1024).sum(dim=1), TimingConfig(), inputs=s)
torch.cuda.synchronize()
y = torch.empty(4096, device="cuda")
x = torch.randn(4096, device="cuda")
cases = {"fill-4K": (lambda: y.fill_(1.0), y), "fill-4K-early": (lambda: y_early.fill_(1.0), y_early), "gelu-4K": (lambda: F.gelu(x), x),
         "four-4K": (lambda: x.add(1.0).mul_(2.0).sub_(3.0).div_(4.0), x)}
res = {n: measure(fn, TimingConfig(), inputs=i).median_ms * 1e3 for n, (fn, i) in cases.items()}


def per_node_us(stream) -> float:
    """An empty kernel's time per node in a graph replayed from `stream`: (100 nodes - 50) / 50."""
    side = torch.cuda.Stream()
    graphs = []
    for n in (50, 100):
        g = torch.cuda.CUDAGraph()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(0)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(g, stream=side):
            for _ in range(n):
                torch.cuda._sleep(0)
        graphs.append(g)
    with torch.cuda.stream(stream):
        return graph_nodes.per_node_us(*graphs, reps=30)


legacy_node = per_node_us(torch.cuda.default_stream())
own_node = per_node_us(torch.cuda.Stream())
again = {n: measure(fn, TimingConfig(), inputs=i).median_ms * 1e3 for n, (fn, i) in cases.items()}
out = []
for n, (fn, _) in cases.items():
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for _ in range(50):
            fn()
    found = calls_of(profiled_ops(g.replay, 4), op_names(fn))
    cupti = statistics.median(sum(e.device_time_total for e in c) for c in found)
    out.append(f"{n} {res[n]:.3f} then {again[n]:.3f} vs CUPTI {cupti:.3f} ({res[n] - cupti:+.3f})")

side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
kernel_nodes = "?"
try:
    g = torch.cuda.CUDAGraph(keep_graph=True)
    g.enable_debug_mode()
    with torch.cuda.graph(g, stream=side):
        for _ in range(10):
            cases["four-4K"][0]()
    path = os.path.join(os.environ.get("OUT", "/tmp"), "four.dot")
    g.debug_dump(path)
    dot = open(path).read()
    kernel_nodes = f"{dot.count('KERNEL')} KERNEL in dot ({len(dot)} chars)"
except Exception as exc:  # noqa: BLE001 - a probe: say what failed, keep the timings
    kernel_nodes = f"debug_dump failed: {type(exc).__name__}: {exc}"
e = torch.cuda.CUDAGraph()
with torch.cuda.graph(e, stream=side):
    for _ in range(50):
        torch.cuda._sleep(0)
empty_cupti = statistics.median(ev.time_range.elapsed_us() for ev in profiled_ops(e.replay, 4))
out.append(f"empty per node: legacy {legacy_node:.3f}, own {own_node:.3f} vs CUPTI {empty_cupti:.3f}; "
           f"four-4K x10 graph: {kernel_nodes}")
print(f"PREP={','.join(PREP) or 'none'}: " + "; ".join(out))
