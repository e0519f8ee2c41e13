#!/usr/bin/env bash
# graph_state_probe.py without a footprint, with 16 GiB mapped before the cases, and after them.
set -uo pipefail
. docs/ab-check/setup.sh
for v in "0 0" "16384 0" "16384 1" "0 0"; do
  set -- $v
  FOOTPRINT_MIB=$1 FOOTPRINT_AFTER=$2 timeout 150 python docs/ab-check/graph_state_probe.py 2>&1 | grep -v Warning | tee -a "$OUT/probe.log" | tail -7
done
