#!/usr/bin/env bash
# On a host of two GPUs, from the repo root: commit the working tree as the base (the copy's .git is
# older), then the A/B of identical revisions `gpuperf ab HEAD --rounds 3 --budget none -- perf_tests -k "$K"`
# (K defaults to 'elu or softmax') on one GPU (--gpus 1) and on both (--gpus 2), after a plain run of
# the same tests on GPU 0 for the cost ratio (PLAIN=0 leaves it out; it runs first, so the A/B runs
# find the compile caches warm). GPUS="2" runs only the two-GPU A/B. Writes each run's log and JSON,
# and summary.txt: wall times, exits, each A/B's rounds and verdict counts.
set -uo pipefail
. docs/ab-check/setup.sh
K="${K:-elu or softmax}"
g() { git -c user.email=ab@example.com -c user.name=ab "$@"; }
[ -d .git ] || g init -q
g add -A . >/dev/null && g commit -qm "ab base" --allow-empty
timed() {  # name, command...: run it, its output in $OUT/name.log, its wall time in summary.txt
  local name=$1 t0; shift
  t0=$(date +%s)
  timeout "${STEP_S:-590}" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $?, $(( $(date +%s) - t0 )) s wall" | tee -a "$OUT/summary.txt"
}
if [ "${PLAIN:-1}" != 0 ]; then
  timed plain env CUDA_VISIBLE_DEVICES=0 python -m pytest perf_tests -k "$K" -q -p no:randomly --gpuperf \
    --gpuperf-no-compare --gpuperf-json="$OUT/plain.json"
fi
for n in ${GPUS:-1 2}; do
  timed "ab-gpus$n" gpuperf ab HEAD --rounds 3 --budget none --gpus "$n" --json "$OUT/ab-gpus$n.json" -- perf_tests -k "$K" -q \
    -p no:randomly
  grep -E "tests on|after round|pytest processes|s wall|in the (base|head)'s" "$OUT/ab-gpus$n.log" >> "$OUT/summary.txt"
done
python - "$OUT" >> "$OUT/summary.txt" <<'PY'
import collections, json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("ab-gpus*.json")):
    info = [b["extra_info"] for b in json.loads(path.read_text())["benchmarks"]]
    counts = collections.Counter(i.get("verdict") for i in info)
    print(f"{path.name}: {len(info)} tests: " + ", ".join(f"{n} {v}" for v, n in counts.most_common()))
    for i in info:
        if i.get("verdict") in ("slower", "faster"):
            print(f"  {i.get('verdict')}: {i.get('message')}")
PY
cat "$OUT/summary.txt"
echo "total $(( $(date +%s) - S )) s"
