#!/usr/bin/env bash
# state_timeline_probe.py in fresh processes: clocks read or not, and with idle host time between iterations.
set -uo pipefail
. docs/ab-check/setup.sh
for v in ${VARIANTS:-"NVML=1" "NVML=0" "NVML=1 IDLE_S=1"}; do
  [ "${CHILD_FIRST:-0}" = 1 ] && python -m pytest_gpuperf.measure.node_gap_probe > /dev/null 2>&1  # a CUPTI session just before
  env $v timeout 150 python docs/ab-check/state_timeline_probe.py 2>&1 | grep -v Warn | tee -a "$OUT/timeline.log"
done
