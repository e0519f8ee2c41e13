# Sourced by the device scripts here: install the working tree (unless SKIP_INSTALL is set), note the GPU's state, start the clock (S).
# On exit, what the script wrote under $OUT is packed into one archive (the device returns 8 files at most).
[ -n "${SKIP_INSTALL:-}" ] || python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,uuid,clocks.sm,power.limit,temperature.gpu --format=csv >> "$OUT/gpu.txt"
S=$(date +%s)
_pack() { (cd "$OUT" && ls | grep -v '\.tgz$' | tar czf "$(basename "$0" .sh)-$$.tgz" --remove-files -T - 2>/dev/null); }
trap _pack EXIT
