#!/usr/bin/env bash
# Device script (one GPU), run from the repository root: what an A/B of identical revisions costs
# against a plain run of the same tests (issue 49: at most 2.5x). FILES: the tests (the whole suite's
# A/B outlasts one 600 s device command; ab_cost_gpus.sh runs a quarter on each of four GPUs). A
# plain run first fills the compile caches, as a CI runner with a cache would have them (WARMED=1:
# an earlier run did); then the A/B; then the plain run again, warm, which the A/B is compared with.
# AB_ARGS: `gpuperf ab` options (ab_device.sh's default: "--budget none"; "--budget 2.5x" for the CLI's). COMPILE_CACHE=DIR: every run keeps its compile caches
# in DIR (--gpuperf-compile-cache; a folder carried from an earlier command, so WARMED=1 holds on a
# fresh machine). WARM_S=0: no plain run after the A/B (the whole suite's A/B and a plain run outlast
# one device command; the budget's plain run is then round 1's faster process).
set -uo pipefail
files="${FILES:-perf_tests}${COMPILE_CACHE:+ --gpuperf-compile-cache $COMPILE_CACHE}"
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/gpuperf-pycache} PYTHONUNBUFFERED=1
mkdir -p "$OUT"
[ -n "${SKIP_INSTALL:-}" ] || python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
export SKIP_INSTALL=1  # ab_device.sh's setup.sh: installed already
plain() { timeout "$1" python -m pytest $files --gpuperf -q -p no:randomly -p no:cacheprovider > "$OUT/$2.log" 2>&1; }
# ninja can find a carried cache's CUDA C++ builds out of date on another host, and torch then rebuilds
# them in whichever process loads one first: build them before the clock.
[ -z "${WARMED:-}" ] || [ -z "${COMPILE_CACHE:-}" ] || python - "$COMPILE_CACHE" <<'PY'
import os, sys
from pytest_gpuperf.plugin.compile_cache import folders
os.environ.update({variable: os.path.join(sys.argv[1], sub) for variable, sub in folders()})
from kernels import cuda_ext
names = [path.stem for path in cuda_ext.CUDA_DIR.glob("*.cu")]
cuda_ext.prebuild(names)
for name in names:
    cuda_ext.load(name)  # waits for its build; a failed one raises here, with nvcc's output
PY
t0=$(date +%s); [ -n "${WARMED:-}" ] || plain "${COLD_S:-160}" cold; t1=$(date +%s)
mkdir -p "$OUT/ab"  # ab_device.sh packs its own folder into one archive on exit
OUT="$OUT/ab" timeout "${AB_S:-300}" bash docs/ab-check/ab_device.sh identical $files -q -p no:randomly > "$OUT/ab.log" 2>&1
t2=$(date +%s); [ "${WARM_S:-130}" = 0 ] || plain "${WARM_S:-130}" warm; t3=$(date +%s)
ratio=$([ $t3 -gt $t2 ] && python -c "print(round(($t2-$t1)/($t3-$t2), 2))" || echo "not measured")
echo "$files: plain cold $(( t1 - t0 )) s, ab $(( t2 - t1 )) s, plain warm $(( t3 - t2 )) s, ratio $ratio"
grep -E "gpuperf ab:|slower|faster" "$OUT/ab.log" | tail -6
