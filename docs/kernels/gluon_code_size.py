"""SASS size of the Gluon forward's sm_90a code, compiled on any machine (no GPU): instructions,
MUFU.EX2 and HGMMA counts for two and three consumers, full and causal, inline (as committed) and
with ``_attend`` a called function (``noinline``; its warp-specialized partitions then share it).

    python docs/kernels/gluon_code_size.py
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kernels import flash_attention_gluon as fg  # noqa: E402

NVDISASM = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"


def sass(kernel) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        return subprocess.run([str(NVDISASM), "-c", str(cubin)], capture_output=True, text=True, check=True).stdout


print(f"{'tiles':<16}{'mask':<8}{'attend':<10}{'instructions':>13}{'MUFU.EX2':>10}{'HGMMA':>7}")
for noinline in (False, True):
    fg._attend.noinline = noinline
    for fn in vars(fg).values():  # the memoized cache keys hold it: compute them anew
        if isinstance(fn, getattr(triton.runtime.jit, "JITCallable", triton.runtime.jit.JITFunction)):
            fn.hash = None
    for name, tiles in (("two consumers", fg.default_tiles(64)), ("three consumers", fg.D64_WIDE_TILES)):
        for causal in (False, True):
            text = sass(fg.compile_only(64, causal, tiles=tiles))
            count = sum(1 for line in text.splitlines() if line.strip().startswith("/*") and "*/" in line
                        and line.split("*/", 1)[1].strip())
            print(f"{name:<16}{'causal' if causal else 'full':<8}{'called' if noinline else 'inline':<10}"
                  f"{count:>13}{text.count('MUFU.EX2'):>10}{text.count('HGMMA'):>7}")
