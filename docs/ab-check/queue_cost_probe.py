"""Device check: what does the host spend to queue one events-timed sample of a bf16 matmul 4096?

`PYTHONPATH=. python docs/ab-check/queue_cost_probe.py`: host µs per call of the matmul's launch
alone, of a sample with a fresh pair of timing events (as the timer's batches made them), and of a
sample with a pair made and recorded once before; each over 200 calls (within the launch queue) queued behind a long spin
(the device never makes the host wait), and the GPU time of the matmul for scale. Then the GPU's
span per call with a timing pair around each call, one event after each, or none between calls, at
boost and after a second of load under the power cap.
"""
import time

import torch

N, CALLS = 4096, 200
a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)


def host_us(queue_one, prepare=lambda: None) -> float:
    state = prepare()
    torch.cuda.synchronize()
    torch.cuda._sleep(400_000_000)  # ~0.2 s of spin: everything below queues behind it
    t = time.perf_counter()
    for i in range(CALLS):
        queue_one(i, state)
    us = (time.perf_counter() - t) / CALLS * 1e6
    torch.cuda.synchronize()
    return us


def fresh(i, _):
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    a @ b
    end.record()


def made_before():
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(CALLS)]
    for p, q in pairs:
        p.record()
        q.record()
    return pairs


def reused(i, pairs):
    pairs[i][0].record()
    a @ b
    pairs[i][1].record()


for _ in range(2):
    print(f"launch alone {host_us(lambda i, s: a @ b):6.1f} us  fresh event pair {host_us(fresh):6.1f} us  "
          f"reused pair {host_us(reused, made_before):6.1f} us per sample", flush=True)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(100):
    a @ b
e.record()
e.synchronize()
print(f"GPU time per matmul {s.elapsed_time(e) * 10:.1f} us")


def gpu_layout(label: str, events_per_call: str) -> None:
    """200 calls queued behind a spin, timed by a begin/end pair per call ("pair"), by one event after
    each call ("chain"), or only around all of them ("none"): the span per call, and for pairs the
    span left outside the pairs."""
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(2 * CALLS + 2)]
    torch.cuda.synchronize()
    torch.cuda._sleep(10_000_000)
    marks[0].record()
    used = 1
    for _ in range(CALLS):
        if events_per_call == "pair":
            marks[used].record()
            used += 1
        a @ b
        if events_per_call in ("pair", "chain"):
            marks[used].record()
            used += 1
    marks[used].record()
    torch.cuda.synchronize()
    span = marks[0].elapsed_time(marks[used]) / CALLS * 1e3
    text = f"{label:32} span per call {span:6.1f} us"
    if events_per_call == "pair":
        inside = sum(marks[i].elapsed_time(marks[i + 1]) for i in range(1, used, 2)) / CALLS * 1e3
        text += f", inside the pairs {inside:6.1f} us, outside {span - inside:5.1f} us"
    print(text, flush=True)


def load(seconds: float) -> None:
    """The matmul back to back for `seconds`, so that the power cap holds the clock down."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(20):
            a @ b
        torch.cuda.current_stream().synchronize()


for loaded in (False, True):
    for _ in range(2):
        for label, layout in (("a begin/end pair per call", "pair"), ("one event after each call", "chain"),
                              ("events only around the 200", "none")):
            if loaded:
                load(1.0)
            gpu_layout(label + (" (capped)" if loaded else ""), layout)
