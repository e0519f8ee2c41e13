

# ---- A/B check only (never committed): two tests in three (by a hash of the node id) do 5% more GPU work
# (10% below 20 µs) in their call, a spin kernel after the function sized from this device's baseline
# median; the others are unchanged.
from pathlib import Path

import yaml as _yaml

_SLOW_BASE = {}


def _slow_base(key):
    if not _SLOW_BASE:
        import torch
        from pytest_gpuperf.measure.device import describe
        path = Path(__file__).resolve().parent.parent / "baselines" / f"{describe(0)['key']}.yaml"
        _SLOW_BASE.update(_yaml.safe_load(path.read_text())["entries"])
    return _SLOW_BASE.get(key)


@pytest.fixture
def gpu_benchmark(gpu_benchmark, request):
    import torch
    import zlib
    slowed_half = zlib.crc32(request.node.nodeid.encode()) % 3 != 0
    entry = _slow_base(request.node.nodeid) if torch.cuda.is_available() and slowed_half else None
    if entry is None:
        return gpu_benchmark
    share = 0.05 if entry["median_ms"] >= 0.02 else 0.10
    cycles = max(int(share * entry["median_ms"] * 1e-3 * 1.755e9), 1)

    class Slowed:
        def __call__(self, fn, *args, **kwargs):
            def slowed(*a, **kw):
                out = fn(*a, **kw)
                torch.cuda._sleep(cycles)
                return out
            return gpu_benchmark(slowed, *args, **kwargs)

        def __getattr__(self, name):
            return getattr(gpu_benchmark, name)

    return Slowed()
