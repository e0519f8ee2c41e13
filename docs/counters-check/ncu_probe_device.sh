#!/usr/bin/env bash
# Device script for ncu_probe.py: metric names, CSV layout with and without --nvtx, and cost.
set -x
NCU=/usr/local/cuda/bin/ncu
$NCU --version
nvidia-smi --query-gpu=name,driver_version --format=csv
$NCU --query-metrics --chip gh100 2>&1 | grep -Ei "^(sm__inst_executed |sm__inst_executed_pipe_tensor|dram__bytes_read |dram__bytes_write |lts__t_bytes |sm__warps_active|sm__pipe_tensor|smsp__inst_executed_op_gmma|sm__inst_executed_pipe_tensor_op)" | head -40
M=sm__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__inst_executed_pipe_tensor.sum,sm__warps_active.avg.pct_of_peak_sustained_active
time $NCU --profile-from-start off --metrics $M --csv --page raw --log-file $OUT/raw.csv python docs/counters-check/ncu_probe.py
time $NCU --profile-from-start off --nvtx --metrics $M --csv --page raw --log-file $OUT/raw_nvtx.csv python docs/counters-check/ncu_probe.py
time $NCU --profile-from-start off --metrics sm__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv --page raw --log-file $OUT/raw3.csv python docs/counters-check/ncu_probe.py
time $NCU --profile-from-start off --cache-control all --clock-control none --metrics $M -o $OUT/rep python docs/counters-check/ncu_probe.py
ls /usr/local/cuda/nsight-compute*/extras/python 2>&1 | head; find / -name "ncu_report*" -path "*python*" 2>/dev/null | head -3
python -c "import cupti" 2>&1 | tail -1
pip list 2>/dev/null | grep -i -E "cupti|nvidia" | head
python -m pip list 2>/dev/null | grep -i -E "cupti|nvidia" | head
head -c 3000 $OUT/raw.csv; echo; head -c 3000 $OUT/raw_nvtx.csv
