

# ---- device check only (never committed): ten bf16 4096 matmuls on a side stream at conftest import,
# which leave every later graph replay of the process slower (docs/measurement.md, "Replay state").
def _side_matmuls():
    if HAS_CUDA:
        side = torch.cuda.Stream()
        a = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
        with torch.cuda.stream(side):
            a.normal_()
            for _ in range(10):
                a @ a
        torch.cuda.synchronize()


_side_matmuls()
