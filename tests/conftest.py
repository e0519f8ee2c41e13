"""pytester runs pytest in-process and restores sys.modules after each run; torch's C extension
cannot be imported a second time, so import it once here, before any inner run does."""
import contextlib

with contextlib.suppress(ImportError):
    import torch  # noqa: F401
