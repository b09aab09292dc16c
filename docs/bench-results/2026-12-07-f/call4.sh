#!/bin/bash
# Call 4 (2026-12-07, session 32): S5 gappy b8 at 4 s / 4 s, 3 repetitions, fresh daemons: the
# installed policy beside MPS-prio and the isolated denominators.
set -u
cd "$(dirname "$0")/.." || exit 1
tar xJf .gpu/carry.tar.xz
nvidia-smi --query-gpu=name,uuid,driver_version,memory.used,clocks.sm --format=csv
D=harvest:kernel_gating=1,in_flight=4,concurrency=2
FRESH_REPS=1 BENCH_SKIP="time-slicing mps mps-thr10 mps-thr20" GPUSHARE_POLICIES="$D@mps-ext" \
  LANE_S=270 timeout 285 bash tools/bench/gpu_lanes.sh \
  "S5_LIMIT=250 S5_BUDGET=220 REPS=3 s5-gappy-4s"
