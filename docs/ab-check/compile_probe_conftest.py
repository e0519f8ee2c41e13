

# ---- device probe only (never committed): torch.compile without benchmarking-based choices
import torch._inductor.config as _inductor_config

_inductor_config.triton.autotune_pointwise = False
if hasattr(_inductor_config, "deterministic"):
    _inductor_config.deterministic = True
