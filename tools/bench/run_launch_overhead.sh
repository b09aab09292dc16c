#!/usr/bin/env bash
# The shim's launch overhead against the null driver: median of 20 repetitions of each row, and
# the difference. Usage: tools/bench/run_launch_overhead.sh [build-dir]
set -euo pipefail
build=${1:-build}
LD_PRELOAD=$build/shim/libgpushare.so LD_LIBRARY_PATH=$build/tools/bench/null_driver \
  "$build/tools/bench/gpushare_bench_launch" --benchmark_repetitions=20 \
  --benchmark_report_aggregates_only=true --benchmark_filter='/threads:1' \
  --benchmark_format=json >/tmp/gpushare_bench_launch.json
python3 - <<'PY'
import json
rows = {b["run_name"].split("/")[0]: b["real_time"] for b in json.load(open("/tmp/gpushare_bench_launch.json"))["benchmarks"] if b.get("aggregate_name") == "median"}
d, s = rows["BM_launch_direct"], rows["BM_launch_through_shim"]
print(f"median ns/launch: direct {d:.2f}, through shim {s:.2f}, shim overhead {s - d:.2f}")
PY
