#!/usr/bin/env bash
# On the device, from the repo root: commit the working tree as the base (the copy's .git is older),
# then `gpuperf ab HEAD` with a head that is identical, slow (slowdown_conftest.py appended to
# perf_tests/conftest.py in the working tree only: extra work after the call), spin (spin.patch
# applied and spin_conftest.py appended too: short elementwise calls spin inside the kernel) or
# alloc (alloc_conftest.py appended: one held allocation, no extra work). Remaining args go to pytest;
# each process's log and results stay in $OUT/logs-MODE (--logs). AB_ARGS: `gpuperf ab` options
# (default "--budget none", as the docs' evidence before the 2.5x default was taken; "--budget 2.5x"
# for the default).
set -uo pipefail
. docs/ab-check/setup.sh
mode=$1; shift
g() { git -c user.email=ab@example.com -c user.name=ab "$@"; }
[ -d .git ] || g init -q
g add -A . >/dev/null && g commit -qm "ab base" --allow-empty
case "$mode" in
  slow) cat docs/ab-check/slowdown_conftest.py >> perf_tests/conftest.py ;;
  spin) g apply docs/ab-check/spin.patch && cat docs/ab-check/slowdown_conftest.py docs/ab-check/spin_conftest.py >> perf_tests/conftest.py ;;
  alloc) cat docs/ab-check/alloc_conftest.py >> perf_tests/conftest.py ;;
esac
gpuperf ab HEAD --rounds 3 ${AB_ARGS:---budget none} --json "$OUT/ab-$mode.json" --markdown "$OUT/ab-$mode.md" \
  --logs "$OUT/logs-$mode" -- "$@"
rc=$?
git checkout -q -- perf_tests/conftest.py kernels
exit $rc
