"""Device check: do a small kernel's graph-timed medians move with where its tensors sit in memory?

`PYTHONPATH=. python docs/ab-check/placement_probe.py [TRIALS]`: in one process, on the timer's
stream, makes the inputs of two calls that read 5-7% apart between H100 machines (the CUDA
softmax of 4x262144 floats, one cluster of 16 blocks a row; the bf16 memory-efficient attention
backward B1 H2 N128 D64, causal) TRIALS times, each time behind a padding allocation of another
size, and prints each trial's median. A spread across trials points at placement (a property of
the process), none at the machine or chip.
"""
import sys

import torch

from kernels import flash_attention as fa
from kernels import softmax
from pytest_gpuperf.measure import calibration
from pytest_gpuperf.measure.timer import TimingConfig, measure

TRIALS = int(sys.argv[1]) if len(sys.argv) > 1 else 6
ATTENTION_SHAPE = (1, 2, 128, 64)
cal = calibration.default()
print(torch.cuda.get_device_name(), torch.cuda.get_device_properties(0).uuid, flush=True)


def softmax_case():
    (x,) = softmax.make_inputs((4, 262144), torch.float32, "cuda")
    return (lambda: softmax.cuda_softmax(x)), x


def attention_case():
    q, k, v = fa.make_inputs(ATTENTION_SHAPE, torch.bfloat16, "cuda")
    for t in (q, k, v):
        t.requires_grad_(True)
    dout = fa.make_grad_output(ATTENTION_SHAPE, torch.bfloat16, "cuda")
    out = fa.torch_efficient(q, k, v, True)
    return (lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)), (q, k, v, dout)


keep = []
with cal.on_stream(torch, torch.cuda.current_device()):
    for trial in range(TRIALS):
        keep.append(torch.empty((trial * 7919 + 1) * 4096, dtype=torch.uint8, device="cuda"))  # shift placement
        row = []
        for name, make in (("softmax cuda fp32 4x262144", softmax_case), ("attn bwd efficient", attention_case)):
            fn, inputs = make()
            m = measure(fn, TimingConfig(), inputs=inputs)
            row.append(f"{name} {m.median_ms * 1e3:7.3f} us ({m.method})")
            m.value = None
            keep.append(inputs)
        print(f"trial {trial}: " + "  ".join(row), flush=True)
