"""Which history puts a plain process's graph-timed calls in the state where they read as CUPTI's
durations (the steady-state self-check's process) rather than ~0.3 µs per kernel above them? PREP
names what runs before the measurements (comma-separated): big (the self-check's 256M-element fp32
and bf16 tensors, ~4.5 GiB, by randn and empty), ones16 (16 GiB by torch.ones), triton (import
triton.testing), dobench (do_bench of a small fill), stream (what follows runs on a stream of its own, not
the legacy default stream), measure (a harness measurement of a row sum)."""
import os
import statistics

import torch
import torch.nn.functional as F

from pytest_gpuperf.measure.measurement import TimingConfig
from pytest_gpuperf.measure.profile import calls_of, op_names, profiled_ops
from pytest_gpuperf.measure.timer import measure

PREP = [p for p in os.environ.get("PREP", "").split(",") if p]
keep = []
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
    elif step == "measure":
        s = torch.randn(1 << 12, device="cuda")
        measure(lambda: s.view(-1, 1024).sum(dim=1), TimingConfig(), inputs=s)
torch.cuda.synchronize()
y = torch.empty(4096, device="cuda")
x = torch.randn(4096, device="cuda")
cases = {"fill-4K": (lambda: y.fill_(1.0), y), "gelu-4K": (lambda: F.gelu(x), x),
         "four-4K": (lambda: x.add(1.0).mul_(2.0).sub_(3.0).div_(4.0), x)}
res = {n: measure(fn, TimingConfig(), inputs=i).median_ms * 1e3 for n, (fn, i) in cases.items()}
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
    out.append(f"{n} {res[n]:.3f} vs CUPTI {cupti:.3f} ({res[n] - cupti:+.3f})")
print(f"PREP={','.join(PREP) or 'none'}: " + "; ".join(out))
