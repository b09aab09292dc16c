#!/bin/bash
# Call 3 (2026-12-08, session 34): S1a (resnet50 b32 training + b32 training), 3 repetitions, fresh
# daemons, with 6665ec2 (a period without opportunistic demand left out of the budget's debt):
# the installed policy beside MPS-prio and the isolated denominators (no thread-limit rows: the
# device time left allows no more).
set -u
cd "$(dirname "$0")/.." || exit 1
tar xJf .gpu/carry.tar.xz
nvidia-smi --query-gpu=name,uuid,driver_version,memory.used,clocks.sm --format=csv
D=harvest:kernel_gating=1,in_flight=4,concurrency=2
FRESH_REPS=1 BENCH_SKIP="time-slicing mps mps-thr10 mps-thr20" S1_SKIP="time-slicing mps mps-thr10 mps-thr20" \
  GPUSHARE_POLICIES="$D@mps-ext" LANE_S=225 timeout 235 bash tools/bench/gpu_lanes.sh \
  "S1_REPS=3 S1_BUDGET=200 s1a"
