#!/usr/bin/env bash
# state_trigger_probe.py after each history (PREP), each in its own process.
set -uo pipefail
. docs/ab-check/setup.sh
for p in none stream stream,ones16 ones16,stream stream,big big,stream none; do
  PREP=$p timeout 120 python docs/ab-check/state_trigger_probe.py 2>&1 | grep -v Warning | tee -a "$OUT/trigger.log" | grep PREP
done
