# Sourced by the device scripts here: install the working tree, note the GPU's state, start the clock (S).
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,power.limit,temperature.gpu --format=csv > "$OUT/gpu.txt"
S=$(date +%s)
