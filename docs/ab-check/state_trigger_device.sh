#!/usr/bin/env bash
# state_trigger_probe.py after each history (PREP; PREPS lists them), each in its own process.
set -uo pipefail
. docs/ab-check/setup.sh
for p in ${PREPS:-none stream stream,ones16 ones16,stream stream,big big,stream none}; do
  PREP=$p timeout 120 python docs/ab-check/state_trigger_probe.py 2>&1 | grep -v "^  _warn_once\|^  return super" | tee -a "$OUT/trigger.log" | grep PREP
done
