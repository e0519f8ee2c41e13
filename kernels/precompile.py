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
import functools
import hashlib
import importlib
import json
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

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


#: Beside Triton's binaries, what compile_all has compiled there, per context (see `context`): a
#: process whose every specialization is listed skips the worker pool, whose start (each worker
#: imports torch and Triton) costs seconds only to load binaries the calls load anyway
#: (docs/kernels/README.md).
DONE_FILE = "kernels-precompiled.json"
#: Contexts the record keeps, the newest last: each edit of the kernels' sources starts a new one.
KEPT_CONTEXTS = 8


def context() -> str:
    """What every compiled specialization of this process depends on besides its own data, as a
    digest: Triton's version, the GPU target, the TRITON_* environment (ptxas, cache dir) and the
    source of every module of this package (a kernel may call helpers from another). A stale match
    only leaves that kernel to compile on its first call."""
    import triton

    try:
        target = str(triton.runtime.driver.active.get_current_target())
    except Exception:  # noqa: BLE001 - no GPU driver (the interpreter): the target is not known
        target = "no target"
    env = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("TRITON_"))
    return _digest([triton.__version__, target, *env, _sources_digest()])


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


@functools.cache
def _sources_digest() -> str:
    from kernels.common import files_digest

    return files_digest(sorted(Path(__file__).parent.glob("*.py")))


def _read_record(path: Path) -> dict[str, list[str]]:
    """Context -> fingerprints of DONE_FILE; empty when there is none or it is not such a record
    (everything then compiles, and loads, again)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(record, dict):
        return {}
    return {k: [f for f in v if isinstance(f, str)] for k, v in record.items() if isinstance(v, list)}


def _write_record(path: Path, key: str, compiled: set[str]) -> None:
    """Add `compiled` to context `key`'s entry, which becomes the newest; only the KEPT_CONTEXTS newest
    stay. A record that cannot be written only costs a pool start later."""
    from pytest_gpuperf.core.files import atomic_write_text

    from filelock import FileLock, Timeout

    with contextlib.suppress(OSError, Timeout), FileLock(f"{path}.lock", timeout=30):
        record = _read_record(path)  # under the lock: pytest-xdist's workers each add their share
        entry = set(record.pop(key, [])) | compiled
        record[key] = sorted(entry)
        atomic_write_text(path, json.dumps(dict(list(record.items())[-KEPT_CONTEXTS:])))


def _compile_in_pool(specs: Specs, workers: int) -> list[str]:
    """Compile `specs` in up to `workers` spawned processes; the specialization data that compiled."""
    workers = max(1, min(len(specs), workers))
    # spawn: the parent has a CUDA context, which a forked child cannot use
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {data: pool.submit(_compile, module, name, data) for data, (module, name) in specs.items()}
        return [data for data, f in futures.items() if f.exception() is None]


@dataclass(frozen=True)
class Precompiled:
    """What compile_all did with its specializations."""

    compiled: int  # now, in the worker pool
    earlier: int  # found in DONE_FILE: compiled into this cache before
    failed: int  # left for the call itself to raise, where its test reports it
    others: int = 0  # the other processes' share (`share`)


def compile_all(specs: Specs, workers: int | None = None, share: tuple[int, int] = (0, 1)) -> Precompiled:
    """Compile in up to `workers` processes (default: one per CPU) the `specs` not compiled into this
    Triton cache before (DONE_FILE). `share` (index, count): this process compiles one of `count`
    disjoint shares, as pytest-xdist's workers do, each with its part of the CPUs; the others' kernels
    reach the cache as their pools finish (a call that comes first compiles its kernel itself)."""
    if not specs:
        return Precompiled(0, 0, 0)
    from triton import knobs

    index, count = share
    # Where the binaries land must stay where the calls look: Inductor, on its first compile,
    # points TRITON_CACHE_DIR at its own directory unless it is set, and later Triton calls would
    # then miss every binary compiled here.
    os.environ.setdefault("TRITON_CACHE_DIR", knobs.cache.dir)
    record_path, key = Path(os.environ["TRITON_CACHE_DIR"]) / DONE_FILE, context()
    done = set(_read_record(record_path).get(key, []))
    prints = {data: _digest([module, name, data]) for data, (module, name) in specs.items()}
    pending = {data: spec for data, spec in specs.items() if prints[data] not in done}
    mine = {data: spec for data, spec in pending.items() if int(prints[data], 16) % count == index}
    cpus = max(1, (os.cpu_count() or 1) // count)
    compiled = _compile_in_pool(mine, workers or cpus) if mine else []
    if compiled:
        _write_record(record_path, key, {prints[data] for data in compiled})
    return Precompiled(len(compiled), len(specs) - len(pending), len(mine) - len(compiled), len(pending) - len(mine))
