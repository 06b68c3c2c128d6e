#!/bin/bash
# s27 run E: energy per call (bench_prefill --energy-ms 500, NVML counter), random and constant
# inputs, two passes of random; the NVML counter's update step from a busy loop of short reads.
cd "$(dirname "$0")"; export FLASHMSA_DATA_DIR=$PWD/../data; L=$OUT/logs; mkdir -p $L; T0=$SECONDS
t() { echo "[$((SECONDS-T0))s] $*"; }
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
python3 - > $L/nvml_step.txt 2>&1 <<'PY'
import ctypes, time
n = ctypes.CDLL("libnvidia-ml.so.1"); n.nvmlInit_v2()
h = ctypes.c_void_p(); n.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
e = ctypes.c_ulonglong(); last = None; steps = []; t0 = time.time(); tl = t0
while time.time() - t0 < 1.0:
    n.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(e))
    if last is not None and e.value != last:
        now = time.time(); steps.append(now - tl); tl = now
    last = e.value
print("counter changes in 1 s (idle):", len(steps), "median step s:", sorted(steps)[len(steps)//2] if steps else None)
PY
t "nvml step: $(cat $L/nvml_step.txt)"
C=16/1:8192:32768,16/1:8192:0,64/4:8192:32768
for run in random_1 constant_1 random_2; do
  d=${run%_*}
  timeout 200 ./bench_prefill --cases $C --reps 20 --selection random --kernels kv_outer --data $d --energy-ms 500 --csv $OUT/en_$run.csv > $L/en_$run.log 2>&1
  t "$run rc=$?"
done
grep -h "energy\|prefill" $L/en_*.log | cut -c1-60,150-400 | head -40
