"""Device check: does capturing or replaying a CUDA graph slow a process's later graph-timed measurements?

`PYTHONPATH=. python docs/ab-check/capture_stream_probe.py VARIANT` (one process per variant): on the
timer's stream, measures a fill of 4K floats and GeLU of 1M floats, then does VARIANT with a graph of
50 GeLU calls, then measures both again. Variants: `none`; `side-capture` (captured on torch's own
capture stream, never replayed); `side-replay` (captured there, replayed 18 times behind spins on the
timer's stream); `own-replay` (captured and replayed on the timer's stream); any of them with
`+bench` runs do_bench on the GeLU after it (do_bench clears a 256 MB buffer before each call), and
with `+del` the graph is deleted (its memory pool freed) before the second measurements.
"""
import gc
import sys

import torch
import torch.nn.functional as F

from pytest_gpuperf.measure import calibration
from pytest_gpuperf.measure.timer import TimingConfig, measure

SPIN = 20_000_000
variant, *extra = sys.argv[1].split("+")
cal = calibration.default()
fill_out = torch.empty(1 << 12, device="cuda")
x = torch.randn(1 << 20, device="cuda")
cases = {"fill 4K": ((lambda: fill_out.fill_(1.0)), fill_out), "gelu 1M": ((lambda: F.gelu(x)), x)}


def medians() -> str:
    out = []
    for name, (fn, inputs) in cases.items():
        m = measure(fn, TimingConfig(), inputs=inputs)
        out.append(f"{name} {m.median_ms * 1e3:7.3f} us ({m.method})")
        m.value = None
    return "  ".join(out)


with cal.on_stream(torch, torch.cuda.current_device()) as stream:
    before = medians()
    fn = cases["gelu 1M"][0]
    if variant != "none":
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream if variant == "own-replay" else None):
            for _ in range(50):
                fn()
        if variant.endswith("replay"):
            for _ in range(18):
                torch.cuda._sleep(SPIN)
                graph.replay()
            torch.cuda.synchronize()
    if "del" in extra and variant != "none":
        del graph
        gc.collect()
    if "bench" in extra:
        from triton.testing import do_bench

        do_bench(fn, return_mode="median")
    after = medians()
print(f"{sys.argv[1]:18}  before: {before}\n{'':18}  after:  {after}", flush=True)
