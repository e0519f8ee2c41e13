"""Device check: does one call's measured peak memory depend on the caching allocator's history?

`PYTHONPATH=. python docs/ab-check/peak_memory_probe.py`: the suite's bf16 torch_manual attention backward
B2 H8 N1000 D128, measured by measure() five times in one process, with the allocator's cache
shaped differently before each (nothing, emptied, blocks of 3, 5 and 33 MB cached). Prints each
measurement's peak (requested bytes, as stored) and the allocated bytes' peak over the same call.
Then the same call on a stream of its own (as the timer's calibration stream runs it), its gradients
dropped while it still runs: the requested bytes after a synchronize, and after one more allocation
(which releases blocks freed while a stream still used them), three times.
"""
import torch

from kernels import flash_attention as fa
from pytest_gpuperf.measure.timer import TimingConfig, measure

SHAPE = (2, 8, 1000, 128)
MB = 1_000_000


def allocated_peak(fn) -> int:
    """Bytes the allocator handed out at the peak of one call (its rounding included), less before."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    value = fn()
    torch.cuda.synchronize()
    del value
    return torch.cuda.max_memory_allocated() - before


q, k, v = fa.make_inputs(SHAPE, torch.bfloat16, "cuda")
for t in (q, k, v):
    t.requires_grad_(True)
dout = fa.make_grad_output(SHAPE, q.dtype, "cuda")
out = fa.IMPLS["torch_manual"](q, k, v, False)


def call():
    return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)


shapes = {"as is": [], "emptied": None, "3 MB x20": [3 * MB] * 20, "5 MB x20": [5 * MB] * 20, "33 MB x8": [33 * MB] * 8}
for name, sizes in shapes.items():
    if sizes is None:
        torch.cuda.empty_cache()
    else:
        junk = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in sizes]
        del junk
    m = measure(call, TimingConfig(), inputs=(out, (q, k, v), dout))
    m.value = None
    print(f"{name:9}: peak {m.peak_memory_bytes:,} B (measure(): requested bytes, inputs included)  allocated over one "
          f"call {allocated_peak(call):,} B (inputs not included)"
          f"  median {m.median_ms * 1e3:.1f} us", flush=True)

side = torch.cuda.Stream()
with torch.cuda.stream(side):
    for trial in range(3):
        grads = call()
        del grads  # freed while the backward still runs
        torch.cuda.synchronize()
        synced = torch.cuda.memory_stats()["requested_bytes.all.current"]
        torch.empty(1, dtype=torch.uint8, device="cuda")
        settled = torch.cuda.memory_stats()["requested_bytes.all.current"]
        print(f"side stream, trial {trial}: requested after a synchronize {synced:,} B, after one allocation "
              f"{settled:,} B ({synced - settled:,} B released then)", flush=True)
