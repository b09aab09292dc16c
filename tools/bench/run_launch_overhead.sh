#!/usr/bin/env bash
# The shim's launch overhead against the null driver: median of 20 repetitions of each row, and
# the difference. Two runs of the same benchmark: without a daemon (the gate's fast path), and
# registered as a production job with gpushared (the completion marks every 32 launches on top).
# Usage: tools/bench/run_launch_overhead.sh [build-dir]
set -euo pipefail
build=${1:-build}
tmp=$(mktemp -d)
trap 'kill $daemon 2>/dev/null; rm -rf "$tmp"' EXIT
bench() {
  LD_PRELOAD=$build/shim/libgpushare.so LD_LIBRARY_PATH=$build/tools/bench/null_driver \
    "$build/tools/bench/gpushare_bench_launch" --benchmark_repetitions=20 \
    --benchmark_report_aggregates_only=true --benchmark_filter='/threads:1' \
    --benchmark_format=json >"$tmp/$1.json"
}
bench alone
cat >"$tmp/gpushared.json" <<JSON
{"socket": {"path": "$tmp/gpushared.sock"}, "production": [{"uid": $(id -u)}],
 "policy": {"default": "none"}, "tick_ms": 20, "log_level": "warn"}
JSON
"$build/daemon/gpushared" --config "$tmp/gpushared.json" >"$tmp/gpushared.log" 2>&1 &
daemon=$!
for _ in $(seq 50); do [ -S "$tmp/gpushared.sock" ] && break; sleep 0.1; done
GPUSHARE_SOCKET=$tmp/gpushared.sock GPUSHARE_PRIORITY=production GPUSHARE_QUIET=1 bench production
python3 - "$tmp" <<'PY'
import json, sys
def rows(name):
    data = json.load(open(f"{sys.argv[1]}/{name}.json"))["benchmarks"]
    return {b["run_name"].split("/")[0]: b["real_time"] for b in data if b.get("aggregate_name") == "median"}
a, p = rows("alone"), rows("production")
d, s = a["BM_launch_direct"], a["BM_launch_through_shim"]
print(f"median ns/launch: direct {d:.2f}, through shim {s:.2f}, shim overhead {s - d:.2f}")
d, s = p["BM_launch_direct"], p["BM_launch_through_shim"]
print(f"registered as production (completion marks): direct {d:.2f}, through shim {s:.2f}, "
      f"shim overhead {s - d:.2f}")
PY
