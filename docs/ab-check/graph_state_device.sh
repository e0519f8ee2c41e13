#!/usr/bin/env bash
# graph_state_probe.py in plain processes (no footprint; 16 GiB before the cases; device selected
# first) and under pytest with the plugin, which selects the device before the probe's module loads.
set -uo pipefail
. docs/ab-check/setup.sh
for v in "0 0 0" "16384 0 0" "0 0 1" "16384 0 1"; do
  set -- $v
  echo "== plain python, set_device first: $3"
  FOOTPRINT_MIB=$1 FOOTPRINT_AFTER=$2 SET_DEVICE=$3 timeout 150 python docs/ab-check/graph_state_probe.py 2>&1 | grep -v Warning | tee -a "$OUT/probe.log" | tail -10
done
for mib in 0 16384; do
  echo "== under pytest --gpuperf"
  FOOTPRINT_MIB=$mib timeout 150 python -m pytest docs/ab-check/graph_state_probe.py --gpuperf -s -q -p no:randomly -p no:cacheprovider 2>&1 | grep -v Warning | tee -a "$OUT/probe.log" | grep -A10 "^footprint"
done
