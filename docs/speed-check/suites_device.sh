#!/usr/bin/env bash
# Device script (a two-GPU host), run from the repository root: the whole suite against the committed
# baseline. DIRS="a b": GPU k runs `pytest perf_tests --gpuperf` in the k-th folder (each a snapshot of
# a revision), both at once. XDIST=2 instead: one process in the first folder over both GPUs (-n 2).
# EXTRA: more pytest arguments for every run (e.g. "--durations=40"); FILES: what to run (perf_tests);
# NAME: the results' name for XDIST runs (xdist), else their names' prefix (two runs in one $OUT).
# COMPILE_CACHE=DIR: the compile caches in DIR (--gpuperf-compile-cache, an absolute path); PACK=1: then packed
# into $OUT/cc.tar.xz.* (15 MB parts), to carry into a later command (ab_cost_device.sh's COMPILE_CACHE).
set -uo pipefail
S=$(date +%s)
export PYTHONUNBUFFERED=1
# The device image sets PYTHONDONTWRITEBYTECODE and ships torch without .pyc files, so each Python
# process (pytest, its workers, the precompile pool, the node-gap child) compiled torch's sources
# anew, ~9 s of CPU each; pip installs write them. Bytecode under a prefix of its own, as there.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/gpuperf-pycache}
nvidia-smi --query-gpu=index,name,driver_version,temperature.gpu --format=csv,noheader
run() {  # folder, name, extra args...
  local dir=$1 name=$2; shift 2
  ( cd "$dir" && python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
    local t0=$(date +%s)
    timeout "${SUITE_S:-520}" python -m pytest ${FILES:-perf_tests} --gpuperf -q -p no:randomly -p no:cacheprovider \
      --gpuperf-json="$OUT/$name.json" ${COMPILE_CACHE:+--gpuperf-compile-cache "$COMPILE_CACHE"} ${EXTRA:-} "$@" > "$OUT/$name.log" 2>&1
    echo "$name: exit $?, $(( $(date +%s) - t0 )) s wall" >> "$OUT/walls.txt" )
}
read -r -a dirs <<< "${DIRS:-.}"
if [ -n "${XDIST:-}" ]; then
  run "${dirs[0]}" "${NAME:-xdist}" -n "$XDIST"
else
  for k in "${!dirs[@]}"; do CUDA_VISIBLE_DEVICES=$k run "${dirs[$k]}" "${NAME:+$NAME-}gpu$k-$(basename "$(realpath "${dirs[$k]}")")" & done
  wait
fi
cat "$OUT/walls.txt"
for f in "$OUT"/${NAME:-*}*.json; do
  echo "== $f"; grep -E "gpuperf: [0-9.]+ s since start|^[0-9]+ tests: |passed|failed" "${f%.json}.log" | tail -4
  python "${dirs[0]}/docs/speed-check/summary.py" "$f"
done
if [ -n "${PACK:-}" ] && [ -n "${COMPILE_CACHE:-}" ]; then  # unpack with: cat cc.tar.xz.* | tar -xJ -C "$(dirname COMPILE_CACHE)"
  (cd "$(dirname "$COMPILE_CACHE")" && XZ_OPT="-6 -T0" tar -cJf - "$(basename "$COMPILE_CACHE")" | split -b 15M - "$OUT/cc.tar.xz.")
  ls -la "$OUT"/cc.tar.xz.*
fi
echo "total $(( $(date +%s) - S )) s"
