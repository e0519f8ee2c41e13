

# ---- A/B check only (never committed): the head differs from the base by one allocation held for the
# session (the size of slowdown_conftest.py's injected matmul operands, 136 MiB), and nothing else.
# Shows whether a revision that only allocates differently moves unchanged kernels (placement).
import torch as _torch

_HELD = _torch.empty(136 << 20, dtype=_torch.uint8, device="cuda") if _torch.cuda.is_available() else None
