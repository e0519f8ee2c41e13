"""Compile the Triton kernels some calls will launch, side by side in worker processes, before anything runs.

On a fresh machine the suite's Triton kernels compile one after another, each on its first call
(a fifth of the suite's time: docs/kernels/README.md). Here the calls run first with Triton's
jit cache hook answering "handled", so nothing compiles and nothing launches (an autotuned kernel
lists every config instead of timing them), and what they would have compiled is compiled in a
pool of processes (threads would not do: much of Triton's compile holds the GIL). The binaries
land in Triton's on-disk cache, where the calls then find them.
"""
from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

#: Specialization data (Triton's JSON) -> (module, function name) of the kernel to compile with it.
Specs = dict[str, tuple[str, str]]


@contextlib.contextmanager
def recording() -> Iterator[Specs]:
    """Inside, Triton launches compile and run nothing; the specializations they would have
    compiled are collected in the dict yielded. Outputs of the calls are left unwritten."""
    from triton import knobs
    from triton.runtime.autotuner import Autotuner

    specs: Specs = {}

    def hook(*, fn, compile, **_) -> bool:
        specs[compile["specialization_data"]] = (fn.module, fn.name)
        return True  # handled: Triton neither compiles nor launches

    def every_config(self, *args, **kwargs):
        """What autotuning would compile, without timing it: each config after its pre-hook, as
        the autotuner runs it (a hook may set what the specialization depends on, such as the
        block shape of a TMA descriptor)."""
        kwargs.pop("warmup", None)
        self.nargs = dict(zip(self.arg_names, args))
        try:
            for config in self.prune_configs(kwargs):
                if config.pre_hook:
                    config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
                self.fn.warmup(*args, **kwargs, **config.all_kwargs())
        finally:
            self.nargs = None

    saved = knobs.runtime.jit_cache_hook, Autotuner.run
    knobs.runtime.jit_cache_hook, Autotuner.run = hook, every_config
    try:
        yield specs
    finally:
        knobs.runtime.jit_cache_hook, Autotuner.run = saved


def _compile(module: str, name: str, data: str) -> None:
    """In a worker: compile one specialization into Triton's on-disk cache."""
    from triton.runtime.jit import JITFunction

    kernel = getattr(importlib.import_module(module), name)
    while not isinstance(kernel, JITFunction):  # autotune / heuristics wrappers
        kernel = kernel.fn
    kernel.preload(data)


def compile_all(specs: Specs, workers: int | None = None) -> int:
    """Compile `specs` in up to `workers` processes (default: one per CPU); the number that
    compiled. A failure is left for the call itself to raise, where its test reports it."""
    if not specs:
        return 0
    from triton import knobs

    # Where the binaries land must stay where the calls look: Inductor, on its first compile,
    # points TRITON_CACHE_DIR at its own directory unless it is set, and later Triton calls would
    # then miss every binary compiled here.
    os.environ.setdefault("TRITON_CACHE_DIR", knobs.cache.dir)
    workers = max(1, min(len(specs), workers or os.cpu_count() or 1))
    # spawn: the parent has a CUDA context, which a forked child cannot use
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_compile, module, name, data) for data, (module, name) in specs.items()]
        return sum(f.exception() is None for f in futures)
