

# ---- state check only (never committed): before any test, the process fills FOOTPRINT_MIB of GPU
# memory and keeps it (FOOTPRINT_FREE unset), frees it to the caching allocator (1), or frees it and
# empties the cache (2). Does a large footprint alone set a process's graph-timed state?
import os as _os

import torch as _torch

_MIB = int(_os.environ.get("FOOTPRINT_MIB", "0"))
if _MIB and _torch.cuda.is_available():
    _FOOTPRINT = _torch.ones(_MIB << 20, dtype=_torch.uint8, device="cuda")
    _torch.cuda.synchronize()
    if _os.environ.get("FOOTPRINT_FREE") in ("1", "2"):
        del _FOOTPRINT
        if _os.environ["FOOTPRINT_FREE"] == "2":
            _torch.cuda.empty_cache()
