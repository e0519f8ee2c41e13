#!/usr/bin/env bash
# One device command: the whole suite against the committed baselines (the gate a CI run makes), then
# the bf16 torch_manual attention backward B2 H8 N1000 alone in three processes, for its peak memory,
# and peak_memory_probe.py.
set -uo pipefail
. docs/ab-check/setup.sh
timeout "${SUITE_S:-400}" python -m pytest perf_tests --gpuperf --gpuperf-json="$OUT/suite.json" -q -p no:randomly > "$OUT/suite.log" 2>&1
echo "suite rc=$? $(( $(date +%s) - S )) s"; grep -E "measured:|passed|failed|FAILED" "$OUT/suite.log" | tail -4
K="test_attention_bwd and torch_manual and bfloat16 and full and B2H8N1000D128"
for i in 1 2 3; do
  timeout 60 python -m pytest perf_tests/test_attention.py -k "$K" --gpuperf --gpuperf-json="$OUT/mem$i.json" -q -p no:randomly > "$OUT/mem$i.log" 2>&1
  python -c "import json,sys; b=json.load(open(sys.argv[1]))['benchmarks'][0]['extra_info']; print('alone', b['peak_memory_bytes'], b.get('memory_verdict'))" "$OUT/mem$i.json"
done
PYTHONPATH=. timeout 60 python docs/ab-check/peak_memory_probe.py 2>&1 | grep -E "peak|Error"
