#!/bin/bash
# Session 22 run B: per-SM combine bandwidth with the combine confined to a few free SMs (hog kernel on the rest).
cd "$(dirname "$0")"; L=$OUT/logs; mkdir -p $L
trap 'cd $OUT && tar czf results.tgz --remove-files logs *.csv 2>/dev/null' EXIT
CUDA_MODULE_LOADING=EAGER timeout 60 ./bench_combine_sm --ctas 132 --free-sms 132,40,24,16,12,8 --csv $OUT/combine_hbm.csv 2>&1 | tee $L/combine_hbm.log
CUDA_MODULE_LOADING=EAGER timeout 40 ./bench_combine_sm --rows 8192 --ctas 132 --free-sms 132,40,24,16,12,8 --csv $OUT/combine_l2.csv 2>&1 | tee $L/combine_l2.log
