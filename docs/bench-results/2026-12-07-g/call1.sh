#!/bin/bash
# Call 1 (2026-12-07, session 34; first written in session 33): S2 (resnet50_infer_b8 Poisson server at loads 0.3 and 0.5 beside
# transformer_train_b32 training), 3 repetitions, fresh daemons: the installed policy beside MPS-prio and the
# isolated denominators, with the head's daemon and shim (the policy unchanged since 2690376).
set -u
cd "$(dirname "$0")/.." || exit 1
tar xJf .gpu/carry.tar.xz
nvidia-smi --query-gpu=name,uuid,driver_version,memory.used,clocks.sm --format=csv
D=harvest:kernel_gating=1,in_flight=4,concurrency=2
FRESH_REPS=1 BENCH_SKIP="time-slicing mps mps-thr10 mps-thr20" GPUSHARE_POLICIES="$D@mps-ext" \
  LANE_S=390 timeout 410 bash tools/bench/gpu_lanes.sh "S2_REPS=3 S2_BUDGET=330 S2_LIMIT=380 s2"
