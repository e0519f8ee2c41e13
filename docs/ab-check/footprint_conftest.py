

# ---- state check only (never committed): the process fills FOOTPRINT_MIB of GPU memory and keeps it
# (FOOTPRINT_FREE unset), frees it to the caching allocator (1), or frees it and empties the cache
# (2): at conftest import, on the legacy default stream, before the session selects the device; or,
# with FOOTPRINT_AT=collection, after collection, once the session has made the tests' stream.
import os as _os

import torch as _torch

_MIB = int(_os.environ.get("FOOTPRINT_MIB", "0"))


def _fill_footprint() -> None:
    global _FOOTPRINT
    _FOOTPRINT = _torch.ones(_MIB << 20, dtype=_torch.uint8, device="cuda")
    _torch.cuda.synchronize()
    if _os.environ.get("FOOTPRINT_FREE") in ("1", "2"):
        del _FOOTPRINT
        if _os.environ["FOOTPRINT_FREE"] == "2":
            _torch.cuda.empty_cache()


if _MIB and _torch.cuda.is_available():
    if _os.environ.get("FOOTPRINT_AT") == "collection":
        def pytest_collection_finish(session) -> None:  # replaces the suite's (no CUDA builds needed)
            _fill_footprint()
    else:
        _fill_footprint()
