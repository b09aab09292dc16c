#!/bin/bash
# Call 3 (2026-12-07, session 32): S5 gappy b8 and saturating b32 at 1 s / 1 s, 4 repetitions each,
# fresh daemons: the installed policy beside MPS-prio and the isolated denominators.
set -u
cd "$(dirname "$0")/.." || exit 1
tar xJf .gpu/carry.tar.xz
nvidia-smi --query-gpu=name,uuid,driver_version,memory.used,clocks.sm --format=csv
D=harvest:kernel_gating=1,in_flight=4,concurrency=2
FRESH_REPS=1 BENCH_SKIP="time-slicing mps mps-thr10 mps-thr20" GPUSHARE_POLICIES="$D@mps-ext" \
  LANE_S=540 timeout 560 bash tools/bench/gpu_lanes.sh \
  "S5_LIMIT=265 S5_BUDGET=240 REPS=4 s5-gappy-1s s5-saturating-1s"
