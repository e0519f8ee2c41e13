"""Shared set-up for the bundled perf suite.

Without a CUDA device the same tests run as CPU correctness tests: the torch impls on the CPU,
Triton under its interpreter (TRITON_INTERPRET=1, set here before any kernel module is imported)
at small sizes, and the CUDA C++ impls skipped with a reason.
"""
from __future__ import annotations

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _pin_ptxas() -> None:
    """Every Triton kernel of the run compiles with the same ptxas: the one torch ships, which
    Inductor points TRITON_PTXAS_PATH at (unless set) when it first compiles. Left to Inductor,
    the kernels compiled before the first torch.compile case used Triton's own ptxas (12.8 with
    Triton 3.6) and those after it torch's (13.0 with torch 2.11+cu130), so which binary a kernel
    got depended on which tests ran before it, and Triton, which takes the ptxas version into its
    cache key once per process, could even load the other one's binary: on an H100 and an H200 the
    Triton attention forward at B1 H2 N128 D64 read 12% slower with the precompiled (12.8)
    binaries than in the runs whose kernels compiled after Inductor had repointed ptxas."""
    ptxas = os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas")
    if os.access(ptxas, os.X_OK):
        os.environ.setdefault("TRITON_PTXAS_PATH", ptxas)


def _compile_in_process() -> None:
    """Inductor compiles in the process that asks (one compile thread, unless set): its default pool
    of up to 32 subprocesses per process compiles the suite's graphs of one to a few kernels no
    faster and slows each worker's start and exit (docs/measurement.md, "Where a suite's time
    goes"). Set before Inductor's config is imported; the workers inherit it."""
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


if HAS_CUDA:
    _pin_ptxas()
    _compile_in_process()

DEVICE = "cuda" if HAS_CUDA else "cpu"

# Largest problem (in elements of the biggest operand) a CPU correctness run takes on; the
# Triton interpreter runs a block at a time in numpy, so it is kept smaller still.
CPU_MAX_NUMEL = 1 << 20
INTERPRETER_MAX_NUMEL = 1 << 16


#: The torch.compile reference cases are held to this much against a stored baseline: autotuned, their
#: code differed between processes by up to 1.8x; compiled with kernels.common.compile_options() it
#: agrees between processes of one machine, not yet measured across machines (docs/gate.md).
COMPILED_THRESHOLD = "30%"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Self-checks of the harness (selfcheck marker) take minutes: they run only when `-m` asks for
    them, and they time things, so only under --gpuperf. The torch.compile cases get their
    threshold (COMPILED_THRESHOLD)."""
    compiled = pytest.mark.gpuperf(threshold=COMPILED_THRESHOLD)
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("impl") == "compiled" and item.get_closest_marker("gpuperf") is None:
            item.add_marker(compiled)
    if "selfcheck" not in (config.getoption("markexpr") or ""):
        skip = pytest.mark.skip(reason="harness self-check: select with -m selfcheck")
    elif not config.getoption("gpuperf"):
        skip = pytest.mark.skip(reason="harness self-checks time things: run with --gpuperf")
    else:
        return
    for item in items:
        if item.get_closest_marker("selfcheck"):
            item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the nvcc builds of the CUDA extensions that the selected `cuda` cases need (a test
    module lists its own in CUDA_EXTENSIONS), so they compile side by side while other tests run.
    Best effort: anything wrong here (a device that fails its capability query) is raised again by
    the `cuda` tests themselves, when they load the extension."""
    if not HAS_CUDA or session.config.option.collectonly:
        return
    from kernels import cuda_ext

    names = sorted({name for item in session.items
                    if getattr(item, "callspec", None) and item.callspec.params.get("impl") == "cuda"
                    for name in getattr(item.module, "CUDA_EXTENSIONS", ())})
    try:
        cuda_ext.prebuild(names)
    except Exception:  # noqa: BLE001 - see the docstring
        pass
    if os.environ.get("KERNELS_PRECOMPILE", "1") != "0":
        _precompile_triton(session)


class _Enough(Exception):
    """Raised by the dry run's stand-in fixtures: the test body has made its Triton calls."""


def _dry_benchmark(fn, *args, bytes=None, flops=None, **kwargs):  # noqa: A002 - gpu_benchmark's names
    fn(*args, **kwargs)
    raise _Enough


def _enough(*args, **kwargs):
    raise _Enough


def _precompile_triton(session: pytest.Session) -> None:
    """Compile the Triton kernels of the selected Triton cases side by side (kernels/precompile.py).

    Each Triton test body runs once, up to its first gpu_benchmark or gpu_assert_close call, with
    stand-ins for those fixtures and Triton recording instead of compiling; a test that needs
    other fixtures is left out. Best effort: what fails here fails again in its test, which
    reports it."""
    import time

    from kernels import precompile
    from pytest_gpuperf.plugin.workers import xdist_share

    stand_ins = {"device": DEVICE, "gpu_benchmark": _dry_benchmark, "gpu_assert_close": _enough}
    started = time.perf_counter()
    with precompile.recording() as specs:
        for item in session.items:
            callspec = getattr(item, "callspec", None)
            params = callspec.params if callspec else {}
            wanted = params.get("impl") == "triton" or ("impl" not in params and "triton" in item.name)
            names = getattr(getattr(item, "_fixtureinfo", None), "argnames", None)
            if not wanted or names is None or not set(names) <= params.keys() | stand_ins.keys():
                continue
            try:
                item.obj(**{name: params[name] if name in params else stand_ins[name] for name in names})
            except (Exception, pytest.skip.Exception, pytest.fail.Exception):  # noqa: BLE001 - see the docstring
                pass
    # Each pytest-xdist worker compiles a share of the kernels all of them run.
    done = precompile.compile_all(specs, share=xdist_share(session.config))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and specs:
        others = f", {done.others} by the other workers" if done.others else ""
        reporter.write_line(f"perf suite: {len(specs)} Triton kernel specializations: {done.compiled} compiled side "
                            f"by side, {done.earlier} by an earlier run{others}, {done.failed} failed "
                            f"({time.perf_counter() - started:.1f} s)")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Builds still running (a session cut short by -x or a failure) finish inside pytest, where
    the wait is visible, rather than at interpreter exit; builds not started are dropped."""
    if HAS_CUDA:
        from kernels import cuda_ext

        cuda_ext.finish_builds()


@pytest.fixture
def device() -> str:
    return DEVICE


# Fused implementations are timed in every dtype; the others in the two that tell the story.
_ALL_DTYPE_IMPLS = ("triton", "cuda")


def gpu_kept(impl: str, dtype: str, shape: tuple, *, headline: tuple, cpu_only: tuple = ()) -> bool:
    """Whether the GPU suite times this case (a CPU run keeps all it can run).

    The whole impl x dtype x size matrix would take the suite well past its 5-minute budget without
    adding information: float16 is timed for the fused impls (triton, cuda) only, torch_manual (several
    launches, there to show what fusion buys) at the headline size only, and `cpu_only` sizes (made for
    the Triton interpreter) not at all."""
    if not HAS_CUDA:
        return True
    if shape in cpu_only:
        return False
    if impl == "torch_manual" and shape != headline:
        return False
    return dtype != "float16" or impl.startswith(_ALL_DTYPE_IMPLS)


def size_id(shape) -> str:
    """A shape as test ids show it: (4096, 4096) -> "4096x4096"."""
    return "x".join(map(str, shape))


def impl_dtype_size_cases(impls, dtypes, sizes, *, headline: tuple, cpu_only: tuple = (), smoke=(), lead: tuple = ()):
    """pytest.params (*lead, impl, dtype, shape) for impl x dtype x size, in that nesting order, without
    the cases the GPU suite leaves out (gpu_kept). id: "-".join(lead, impl, dtype, size_id(shape));
    marked smoke when (*lead, impl, dtype, shape) is in `smoke`. `lead`: values that come first in every
    case (e.g. GeLU's approximation)."""
    for impl in impls:
        for dtype in dtypes:
            for shape in sizes:
                if not gpu_kept(impl, dtype, shape, headline=headline, cpu_only=cpu_only):
                    continue
                case = (*lead, impl, dtype, shape)
                marks = [pytest.mark.smoke] if case in smoke else []
                yield pytest.param(*case, marks=marks, id="-".join([*lead, impl, dtype, size_id(shape)]))


def needs_gpu(device: str) -> None:
    """Skip a launch-count test without CUDA first: gpu_profile would skip anyway, but only after the
    test built its (large) inputs on the CPU."""
    if device != "cuda":
        pytest.skip("launch counts need a CUDA device")


def require(impl: str, numel: int) -> None:
    """Skip, with a reason, a case this machine cannot run (CUDA C++ or a large size on CPU)."""
    if HAS_CUDA:
        return
    if impl.startswith("cuda"):
        pytest.skip("CUDA C++ impl needs a CUDA device")
    limit = INTERPRETER_MAX_NUMEL if impl.startswith("triton") else CPU_MAX_NUMEL
    if numel > limit:
        pytest.skip(f"{numel} elements is a GPU-only size (CPU correctness runs stop at {limit})")
