#!/bin/bash
# Call 2 (2026-12-07, session 34; first written in session 33): S1a (resnet50 b32 training + b32 training), 3 repetitions, fresh
# daemons: the installed policy beside MPS-prio, MPS 100/10 and 100/20 (the thread-limit frontier)
# and the isolated denominators.
set -u
cd "$(dirname "$0")/.." || exit 1
tar xJf .gpu/carry.tar.xz
nvidia-smi --query-gpu=name,uuid,driver_version,memory.used,clocks.sm --format=csv
D=harvest:kernel_gating=1,in_flight=4,concurrency=2
FRESH_REPS=1 BENCH_SKIP="time-slicing mps mps-thr10 mps-thr20" S1_SKIP="time-slicing mps" \
  GPUSHARE_POLICIES="$D@mps-ext" LANE_S=500 timeout 520 bash tools/bench/gpu_lanes.sh \
  "S1_REPS=3 S1_BUDGET=430 s1a"
