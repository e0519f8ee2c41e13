"""Device check: does a CUDA graph's time per kernel node change in processes started after another
process used CUPTI? `python docs/ab-check/cupti_probe.py [profile]`: prints µs per node of a graph
of 50 tiny kernels (median of 200 replays timed with events); with `profile`, the process first
runs one torch.profiler session (CUPTI) and measures after it."""
import statistics
import sys

import torch

x = torch.zeros(4096, device="cuda")
stream = torch.cuda.Stream()
stream.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(stream):
    x.add_(1)
torch.cuda.current_stream().wait_stream(stream)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    for _ in range(50):
        x.add_(1)


def per_node_us() -> float:
    times = []
    for _ in range(200):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(20000)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / 50)
    return statistics.median(times)


for _ in range(20):
    graph.replay()
torch.cuda.synchronize()
before = per_node_us()
if sys.argv[1:] == ["profile"]:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]):
        graph.replay()
        torch.cuda.synchronize()
    print(f"profiled in this process: before {before:.3f} us/node, after {per_node_us():.3f} us/node")
else:
    print(f"{before:.3f} us/node")
