#!/usr/bin/env bash
# On a freshly started machine: graph time per kernel node in processes before and after one that used
# CUPTI (docs/ab-check/cupti_probe.py), then after gpuperf's node-gap probe.
set -uo pipefail
export PYTHONUNBUFFERED=1
p() { timeout 60 python docs/ab-check/cupti_probe.py "$@" 2>&1 | tail -1; }
echo "A (first process): $(p)"
echo "B (second, no CUPTI yet): $(p)"
echo "C: $(p profile)"
echo "D (after C): $(p)"
echo "E (after D): $(p)"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
