#!/usr/bin/env bash
# Device script: `gpuperf ab --counters` of HEAD against HEAD plus more_work.patch (a few extra
# instructions per element in the Triton and CUDA ELU, an extra load per row in the Triton softmax),
# on the float32 ELU and softmax tests: which tests the counters and the time flag.
set -o pipefail
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
export PYTHONUNBUFFERED=1
git -c user.email=a@b -c user.name=ab commit -qam "device: the tree as sent" || true
git apply docs/counters-check/more_work.patch && git diff --stat
time timeout ${AB_TIMEOUT:-540} gpuperf ab HEAD --counters --rounds 2 --json $OUT/ab.json --markdown $OUT/ab.md -- \
  perf_tests/test_elementwise.py::test_elu perf_tests/test_softmax.py::test_softmax -k float32 2>&1 | tee $OUT/ab.log | tail -80
for f in /tmp/gpuperf-counters-*/pytest.log; do tail -5 $f; done
