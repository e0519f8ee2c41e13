#!/usr/bin/env bash
# queue_depth_probe.py after each history (PREPS lists them), each in its own process.
set -uo pipefail
. docs/ab-check/setup.sh
for p in ${PREPS:-none legacy_kernel legacy_wait big_side}; do
  PREP=$p ROUNDS=${ROUNDS:-1} timeout 150 python docs/ab-check/queue_depth_probe.py 2>&1 | grep -v "[wW]arn" | tee -a "$OUT/depth.log"
done
