#!/bin/bash
# Call 2 (2026-12-07, session 32): S1b (resnet50 b8 training + b32 training), 4 repetitions, fresh
# daemons: the installed policy beside MPS-prio and the isolated denominators.
set -u
cd "$(dirname "$0")/.." || exit 1
tar xJf .gpu/carry.tar.xz
nvidia-smi --query-gpu=name,uuid,driver_version,memory.used,clocks.sm --format=csv
D=harvest:kernel_gating=1,in_flight=4,concurrency=2
FRESH_REPS=1 BENCH_SKIP="time-slicing mps mps-thr10 mps-thr20" S1_SKIP="time-slicing mps mps-thr10 mps-thr20" \
  GPUSHARE_POLICIES="$D@mps-ext" LANE_S=540 timeout 560 bash tools/bench/gpu_lanes.sh \
  "S1_REPS=4 S1_BUDGET=480 s1b"
