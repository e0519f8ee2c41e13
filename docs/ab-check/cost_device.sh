#!/usr/bin/env bash
# Where a pytest process's time goes when every cache is warm (what each A/B round pays): the smoke
# subset timed whole, once as the environment is and twice with a writable bytecode cache
# (PYTHONPYCACHEPREFIX: the first fills it), then once under cProfile ($OUT/cost.prof, read with pstats).
set -uo pipefail
. docs/ab-check/setup.sh
python -c "import sys, os, sysconfig; p = sysconfig.get_paths()['purelib']; print('dont_write_bytecode', sys.flags.dont_write_bytecode, 'site-packages writable', os.access(p, os.W_OK))"
smoke() { timeout 150 python "$@" -m pytest perf_tests -m smoke --gpuperf --gpuperf-no-compare -q -p no:randomly; }
for how in plain pyc-fill pyc; do
  s=$(date +%s%N)
  if [ "$how" = plain ]; then smoke > "$OUT/cost-$how.log" 2>&1; else PYTHONPYCACHEPREFIX=/tmp/pyc smoke > "$OUT/cost-$how.log" 2>&1; fi
  echo "$how rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms"; grep -E "since start|Triton kernel" "$OUT/cost-$how.log"
done
s=$(date +%s%N)
smoke -m cProfile -o "$OUT/cost.prof" > "$OUT/cost-prof.log" 2>&1
echo "cProfile rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms"
