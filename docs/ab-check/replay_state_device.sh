#!/usr/bin/env bash
# One device command on a two-GPU machine (docs/measurement.md, "Replay state"). GPU 0: the accuracy
# self-check after the side-stream check (which leaves the process in the slow replay state), then the
# elementwise and softmax files against the committed baseline in a fresh process and in one that ran
# ten matmuls on a side stream at conftest import. GPU 1: the whole suite against the baseline.
set -uo pipefail
. docs/ab-check/setup.sh
python - <<'PY' || exit 1
import torch
from pytest_gpuperf.measure.timer import TimingConfig, measure
from pytest_gpuperf.measure import node_gap
x = torch.zeros(4096, device="cuda")
print("fresh:", node_gap.lookup(0))
m = measure(lambda: x.fill_(1.0), TimingConfig(budget_s=0.2), inputs=x, prefer="graph")
print("clean process:", m.method, m.median_ms * 1e3, m.slow_replay_us)
s = torch.cuda.Stream(); a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
with torch.cuda.stream(s):
    [a @ a for _ in range(10)]
torch.cuda.synchronize()
m = measure(lambda: x.fill_(1.0), TimingConfig(budget_s=0.2), inputs=x, prefer="graph")
print("after side matmuls:", m.method, m.median_ms * 1e3, m.slow_replay_us)
PY
(
  CUDA_VISIBLE_DEVICES=0 timeout 150 python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q \
    -p no:randomly -k "another_stream or accuracy" > "$OUT/side.log" 2>&1
  F="perf_tests/test_elementwise.py perf_tests/test_softmax.py"
  CUDA_VISIBLE_DEVICES=0 timeout 200 python -m pytest $F --gpuperf -q -p no:randomly --gpuperf-json="$OUT/fresh.json" > "$OUT/fresh.log" 2>&1
  cp perf_tests/conftest.py /tmp/conftest.py && cat docs/ab-check/side_matmul_conftest.py >> perf_tests/conftest.py
  CUDA_VISIBLE_DEVICES=0 timeout 200 python -m pytest $F --gpuperf -q -p no:randomly --gpuperf-json="$OUT/slowed.json" > "$OUT/slowed.log" 2>&1
  cp /tmp/conftest.py perf_tests/conftest.py
) &
CUDA_VISIBLE_DEVICES=1 timeout "${SUITE_S:-420}" python -m pytest perf_tests --gpuperf --gpuperf-json="$OUT/suite-g1.json" \
  -q -p no:randomly > "$OUT/suite-g1.log" 2>&1 &
wait
grep -hE "^  accuracy|passed|failed" "$OUT/side.log" | sed -E 's/do_bench.*profiled repeat/... repeat/'
for f in fresh slowed suite-g1; do echo "== $f $(( $(date +%s) - S )) s"; grep -E "measured:|passed|failed|FAILED" "$OUT/$f.log" | tail -6; done
