"""Does a graph replay's time depend on how many samples are queued behind it? A graph of 50 fills
of 4K floats, replayed between two events `depth` times back to back behind one spin that covers
their queuing, with and without an L2 flush ahead of each; µs per fill (median), next to the
harness's median with its default batches (batch_s 0.05) and with short ones (batch_s 0.002).
Everything runs on a stream of its own; PREP adds, before it: legacy_kernel (a randn of 4K floats
on the legacy default stream), legacy_wait (the legacy stream waits for the probe's stream),
big_side (16 GiB by torch.ones on the probe's stream)."""
import os
import statistics

import torch

from pytest_gpuperf.measure import calibration
from pytest_gpuperf.measure.measurement import TimingConfig
from pytest_gpuperf.measure.profile import profiled_ops
from pytest_gpuperf.measure.timer import measure

PREP = [p for p in os.environ.get("PREP", "").split(",") if p]
y = torch.empty(4096, device="cuda")
if "legacy_kernel" in PREP:
    x = torch.randn(4096, device="cuda")
side = torch.cuda.Stream()
torch.cuda.set_stream(side)
if "legacy_wait" in PREP:
    torch.cuda.default_stream().wait_stream(side)
if "big_side" in PREP:
    big = torch.ones(16 << 30, dtype=torch.uint8, device="cuda")


def fill():
    y.fill_(1.0)


def graph_of(n):
    fill()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side):
        for _ in range(n):
            fill()
    return g


g50, g100 = graph_of(50), graph_of(100)
flush = calibration.default().flush(torch, 0)


def per_fill(g, calls, depth, flushed):
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(depth)]
    torch.cuda.synchronize()
    torch.cuda._sleep(int(4e6 * max(1, depth // 64)))  # ~2 ms per 64 samples queued: the host stays ahead
    for b, e in ev:
        if flushed:
            flush()
        b.record()
        g.replay()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(b.elapsed_time(e) for b, e in ev) * 1e3 / calls


for round_ in range(int(os.environ.get("ROUNDS", "2"))):
    for flushed in (False, True):
        cells = [f"{d}: {per_fill(g50, 50, d, flushed):.3f}/{per_fill(g100, 100, d, flushed):.3f}"
                 for d in (4, 256)]
        print(f"round {round_} flushed {flushed}: depth -> µs per fill in graphs of 50/100: " + ", ".join(cells))
    for batch_s in (0.05, 0.002):
        cold = measure(fill, TimingConfig(batch_s=batch_s), inputs=y).median_ms * 1e3
        warm = measure(fill, TimingConfig(batch_s=batch_s, cache="warm"), inputs=y).median_ms * 1e3
        print(f"round {round_} harness batch_s {batch_s}: cold {cold:.3f} warm {warm:.3f}")
cupti = statistics.median(e.time_range.elapsed_us() for e in profiled_ops(g50.replay, 4))
print(f"PREP={','.join(PREP) or 'none'}: CUPTI fill {cupti:.3f}")
