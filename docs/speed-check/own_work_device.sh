#!/usr/bin/env bash
# Device script (one GPU), from the repository root: where the bundled tests' own work goes (the time
# outside their measurements). Runs `pytest $FILES -k "$K" --gpuperf` once to warm the compile
# caches, then again under cProfile; prints the profile's top functions by cumulative time.
set -uo pipefail
export PYTHONUNBUFFERED=1
K=${K:-"(test_matmul and (16384x16384x64 or 8192x8192x8192)) or (test_attention_bwd and B4H16N4096)"}
FILES=${FILES:-"perf_tests/test_matmul.py perf_tests/test_attention.py"}
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python -m pytest $FILES -k "$K" --gpuperf -q -p no:randomly > "$OUT/first.log" 2>&1
grep -E "since start|passed|failed" "$OUT/first.log" | tail -2
python -m cProfile -o "$OUT/own.prof" -m pytest $FILES -k "$K" --gpuperf -q -p no:randomly --durations=20 \
  > "$OUT/profiled.log" 2>&1
grep -E "since start|passed|failed" "$OUT/profiled.log" | tail -2
python - "$OUT/own.prof" <<'PY' > "$OUT/own.txt"
import pstats, sys
stats = pstats.Stats(sys.argv[1])
stats.sort_stats("cumulative").print_stats(70)
stats.sort_stats("tottime").print_stats(30)
PY
head -c 20000 "$OUT/own.txt" | grep -E "^ +[0-9]" | head -100
