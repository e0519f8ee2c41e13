"""pytest-gpuperf: honest GPU timing, profiling and per-GPU performance baselines for pytest."""

__version__ = "0.1.0"
