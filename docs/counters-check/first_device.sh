#!/usr/bin/env bash
# Device script: the counters end to end on a few tests, then the whole suite counted once (its cost).
set -o pipefail
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
export PYTHONUNBUFFERED=1
timeout 200 python -m pytest perf_tests/test_elementwise.py -k "elu and 16M" --gpuperf --gpuperf-counters \
  --gpuperf-json=$OUT/smoke.json -p no:cacheprovider 2>&1 | tail -40
cp /tmp/gpuperf-counters-*/pytest.log $OUT/smoke-child.log 2>/dev/null
rm -rf /tmp/gpuperf-counters-*
time timeout 330 python docs/counters-check/count_suite.py $OUT/count1.json perf_tests 2>&1 | tail -5
tail -30 /tmp/gpuperf-counters-*/pytest.log
