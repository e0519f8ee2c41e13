"""Does anything take a process out of the state in which graph replays run slower per node after
large kernels ran on another stream (docs/measurement.md)? µs per node of a graph of 4K-float fills
(graph_nodes.per_node_us) on stream T, before and after ten bf16 4096 matmuls on stream S, then on
S, on streams made afterwards (normal and high priority), on the legacy stream, on T after matmuls
on T itself, and after torch.cuda.empty_cache()."""
import graph_nodes
import torch

y = torch.empty(4096, device="cuda")


def node_us(s) -> float:
    graphs = []
    for n in (50, 100):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(s):
            y.fill_(1.0)
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=CAPTURE if s == torch.cuda.default_stream() else s):
            for _ in range(n):
                y.fill_(1.0)
        graphs.append(g)
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        us = graph_nodes.per_node_us(*graphs)
    torch.cuda.synchronize()
    return us


def matmuls(s) -> None:
    with torch.cuda.stream(s):
        a.normal_()
        for _ in range(10):
            a @ a
    torch.cuda.synchronize()


T, S, CAPTURE = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
a = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)  # no kernel yet
rows = [("T before", node_us(T))]
matmuls(S)
rows += [("T after matmuls on S", node_us(T)), ("S", node_us(S)), ("new stream", node_us(torch.cuda.Stream())),
         ("new high-priority stream", node_us(torch.cuda.Stream(priority=-1))),
         ("legacy stream", node_us(torch.cuda.default_stream()))]
matmuls(T)
rows.append(("T after matmuls on T too", node_us(T)))
torch.cuda.empty_cache()
rows.append(("T after empty_cache", node_us(T)))
print("; ".join(f"{name} {us:.3f}" for name, us in rows))
