"""Where the suite's flex_attention first calls go (issue 49): flex under torch.compile at the suite's
two forward shapes, one process; each call's wall time and Inductor's cache counters after it, and
Dynamo's compile-time breakdown. Run it twice on one host: the second run's caches are warm."""
from __future__ import annotations

import sys
import time

import torch
from torch._dynamo.utils import compile_times, counters

sys.path.insert(0, ".")
from kernels import flash_attention as fa  # noqa: E402

for causal in (False, True):
    for shape in ((1, 2, 128, 64), (4, 16, 4096, 128)):
        q, k, v = fa.make_inputs(shape, torch.bfloat16, "cuda")
        torch.cuda.synchronize()
        t = time.perf_counter()
        fa.flex(q, k, v, causal)
        torch.cuda.synchronize()
        seen = {key: dict(value) for key, value in counters.items() if key in ("inductor", "aot_autograd")}
        print(f"flex causal={causal} {shape}: {time.perf_counter() - t:.2f} s {seen}", flush=True)
        counters.clear()
print(compile_times(repr="str", aggregate=True))
