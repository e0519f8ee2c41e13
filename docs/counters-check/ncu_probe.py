"""Probe of Nsight Compute as the counter source (docs/counters.md): profiler-range windows, a marker
kernel between windows, the CSV's columns, which Hopper metrics exist, and what it costs."""
import sys
import time

import torch
import torch.nn.functional as F

dev = "cuda"
x = torch.randn(4096, 4096, device=dev)
s = torch.randn(64, 1024, device=dev)
a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
q = torch.randn(4, 16, 1024, 128, device=dev, dtype=torch.bfloat16)
marker = torch.zeros(1, device=dev)
calls = {
    "gelu": lambda: F.gelu(x),
    "softmax": lambda: torch.softmax(s, -1),
    "matmul": lambda: a @ a,
    "attention": lambda: F.scaled_dot_product_attention(q, q, q),
    "none": lambda: None,
}
for name, fn in calls.items():
    fn()
torch.cuda.synchronize()
t0 = time.perf_counter()
for rep in range(2):
    for name, fn in calls.items():
        torch.cuda.nvtx.range_push(f"gpuperf:{name}[{rep}]")
        torch.cuda.profiler.start()
        marker.add_(1)  # the window's first kernel
        fn()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        torch.cuda.nvtx.range_pop()
print(f"windows took {time.perf_counter() - t0:.2f} s", file=sys.stderr)
