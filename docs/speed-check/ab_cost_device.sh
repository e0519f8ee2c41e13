#!/usr/bin/env bash
# Device script (one GPU), run from the repository root: what an A/B of identical revisions costs
# against a plain run of the same tests (issue 49: at most 2.5x). HALF=a: elementwise and softmax;
# HALF=b: matmul and attention (the whole suite's A/B outlasts one 600 s device command). The plain
# run goes first, so both find the compile caches as a CI runner with a cache would.
set -uo pipefail
case "${HALF:-a}" in
  a) files="perf_tests/test_elementwise.py perf_tests/test_softmax.py" ;;
  b) files="perf_tests/test_matmul.py perf_tests/test_attention.py" ;;
esac
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/gpuperf-pycache} PYTHONUNBUFFERED=1
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
t0=$(date +%s)
timeout "${PLAIN_S:-200}" python -m pytest $files --gpuperf -q -p no:randomly > "$OUT/plain.log" 2>&1
t1=$(date +%s)
mkdir -p "$OUT/ab"  # ab_device.sh packs its own folder into one archive on exit
OUT="$OUT/ab" timeout "${AB_S:-360}" bash docs/ab-check/ab_device.sh identical $files -q -p no:randomly > "$OUT/ab.log" 2>&1
t2=$(date +%s)
echo "half ${HALF:-a}: plain $(( t1 - t0 )) s, ab $(( t2 - t1 )) s, ratio $(python -c "print(round(($t2-$t1)/max($t1-$t0,1), 2))")"
grep -E "gpuperf ab:|slower|faster" "$OUT/ab.log" | tail -12
