#!/usr/bin/env bash
# Device script: the whole bundled suite with a cold, then a warm compile cache (--gpuperf-compile-cache),
# one phase per device command (a cold run of the suite takes up to ~6.5 minutes):
#   bash docs/compile-check/cache_device.sh cold   # empties the cache folder first
#   bash docs/compile-check/cache_device.sh warm   # the next command on the same machine: the folder as cold left it
# Arguments after the phase go to pytest (e.g. `-m smoke` for a quick try).
# The folder is scratch/compile-cache (ignored by git, so kept between commands on one machine). Each
# phase has a pytest cache of its own, so peaks are measured in both and only the compile caches differ.
# Writes $OUT/<phase>.json, <phase>.log and <phase>.txt (what it prints): wall time, the run's time
# line, summed first_call_s and the slowest first calls (warm: beside cold's), the cache's size.
set -uo pipefail
PHASE=${1:-cold}
shift
case "$PHASE" in cold|warm) ;; *) echo "usage: $0 cold|warm" >&2; exit 2 ;; esac
DIR=$PWD/scratch/compile-cache
COLD_JSON=$PWD/scratch/compile-check-cold.json

phase() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader
  python -c "
import torch, triton, torch._inductor.config as i, torch._functorch.config as f
print('torch', torch.__version__, 'triton', triton.__version__, '| inductor fx_graph_cache', i.fx_graph_cache,
      'autotune_local_cache', i.autotune_local_cache, 'bundle_triton', i.bundle_triton_into_fx_graph_cache,
      'autograd_cache', f.enable_autograd_cache)"
  env | grep -E '^(TRITON_CACHE_DIR|TORCHINDUCTOR_CACHE_DIR|TORCH_EXTENSIONS_DIR|GPUPERF_CACHE_DIR)=' \
    || echo "no cache variable set beforehand"
  if [ "$PHASE" = cold ]; then
    rm -rf "$DIR" "$COLD_JSON"
  elif [ ! -d "$DIR" ]; then
    echo "warm: $DIR does not exist (run the cold phase first, on this machine)"; return 2
  fi
  rm -rf "scratch/pytest-cache-$PHASE"
  local start=$(date +%s)
  timeout 540 python -m pytest perf_tests --gpuperf --gpuperf-compile-cache="$DIR" --gpuperf-json="$OUT/$PHASE.json" \
    -p no:randomly -o cache_dir="scratch/pytest-cache-$PHASE" "$@" > "$OUT/$PHASE.log" 2>&1
  echo "$PHASE: pytest rc=$? wall $(( $(date +%s) - start )) s"
  grep -E "^gpuperf: (compile caches|graph node gap|[0-9.]+ s since start|[0-9]+ first calls? took)|^ +[0-9.]+ s  |(passed|failed).* in " \
    "$OUT/$PHASE.log"
  [ -f "$OUT/$PHASE.json" ] || return 1
  if [ "$PHASE" = cold ]; then
    cp "$OUT/cold.json" "$COLD_JSON"
    python docs/compile-check/first_calls.py "$OUT/cold.json"
  elif [ -f "$COLD_JSON" ]; then
    python docs/compile-check/first_calls.py "$COLD_JSON" "$OUT/warm.json"  # cold's slowest, then warm's
  else
    python docs/compile-check/first_calls.py "$OUT/warm.json"
  fi
  du -sh "$DIR"/* "$DIR"/torch_extensions/* 2>/dev/null
}

python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
export PYTHONUNBUFFERED=1
mkdir -p scratch
phase 2>&1 | tee "$OUT/$PHASE.txt"
