

# ---- A/B check only (never committed): two tests in three (by a hash of the node id) do 5% more GPU work
# (10% below 20 µs) in their call, sized from this device's baseline median; the others are unchanged.
# Matmuls and attention get a bf16 matmul after the call: real work that draws power like theirs, so
# on a power-capped H100 it runs at their clock and costs its share (a spin draws little power, and
# a capped kernel beside it clocked up: a 5% spin realized +2.3-3.4% there). The rest get a spin.
from pathlib import Path

import yaml as _yaml

_SLOW_BASE = {}
_MM = {}
#: The injected matmul: M = N = _MM_MN, K a multiple of _MM_STEP sized to the extra time.
_MM_MN, _MM_STEP, _MM_MAX_K = 2048, 64, 16384
_MM_FROM_MS = 0.005


def _slow_base(key):
    if not _SLOW_BASE:
        from pytest_gpuperf.measure.device import describe
        path = Path(__file__).resolve().parent.parent / "baselines" / f"{describe(0)['key']}.yaml"
        _SLOW_BASE.update(_yaml.safe_load(path.read_text())["entries"])
    return _SLOW_BASE.get(key)


def _mm_ms_per_k():
    """ms per unit of K of the injected matmul, timed with events at K = 4096 (after a warm-up)."""
    import torch
    if not _MM:
        a = torch.randn(_MM_MN, _MM_MAX_K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(_MM_MAX_K, _MM_MN, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(_MM_MN, _MM_MN, device="cuda", dtype=torch.bfloat16)
        k = 4096
        for _ in range(20):
            torch.mm(a[:, :k], b[:k], out=c)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(50):
            torch.mm(a[:, :k], b[:k], out=c)
        end.record()
        torch.cuda.synchronize()
        _MM.update(a=a, b=b, c=c, per_k=start.elapsed_time(end) / 50 / k)
    return _MM["per_k"]


def _slowed_entry(nodeid):
    """The baseline entry of a test in the slowed two thirds (by a hash of its id); None for the rest."""
    import torch
    import zlib
    if not torch.cuda.is_available() or zlib.crc32(nodeid.encode()) % 3 == 0:
        return None
    return _slow_base(nodeid)


@pytest.fixture
def gpu_benchmark(gpu_benchmark, request):
    return _slowed(gpu_benchmark, request)


def _slowed(gpu_benchmark, request):
    """gpu_benchmark, timing each call with its extra work after it (unchanged outside the slowed tests)."""
    import torch
    entry = _slowed_entry(request.node.nodeid)
    if entry is None:
        return gpu_benchmark
    extra_ms = (0.05 if entry["median_ms"] >= 0.02 else 0.10) * entry["median_ms"]
    # a matmul of a few µs is mostly its fixed cost: below _MM_FROM_MS of extra work, a spin
    power_capped = extra_ms >= _MM_FROM_MS and any(name in request.node.nodeid for name in ("test_matmul", "test_attention"))
    k = round(extra_ms / _mm_ms_per_k() / _MM_STEP) * _MM_STEP if power_capped else 0
    if k >= _MM_STEP:
        full, rest = divmod(k, _MM_MAX_K)  # past the largest K, several matmuls
        parts = [_MM_MAX_K] * full + ([rest] if rest else [])
        mms = [(_MM["a"][:, :part], _MM["b"][:part], _MM["c"]) for part in parts]

        def extra():
            for a, b, c in mms:
                torch.mm(a, b, out=c)
    else:
        cycles = max(int(extra_ms * 1e-3 * 1.755e9), 1)

        def extra():
            torch.cuda._sleep(cycles)

    class Slowed:
        def __call__(self, fn, *args, **kwargs):
            def slowed(*a, **kw):
                out = fn(*a, **kw)
                extra()
                return out
            return gpu_benchmark(slowed, *args, **kwargs)

        def __getattr__(self, name):
            return getattr(gpu_benchmark, name)

    return Slowed()
