#!/usr/bin/env bash
# On the GPU machine: gpushared, two PyTorch jobs under the shim, gpusharectl jobs and a
# priority change. Binaries come carried from a build here (.carry/bin, their libraries in
# .carry/lib, used by the daemon and ctl only): tools/crosscheck/daemon_demo_gpu.sh <out-dir>
set -uo pipefail
out=$1; mkdir -p "$out"; here=$(dirname "$0")
bin=$(realpath .carry/bin); lib=$(realpath .carry/lib); shim=$(realpath .carry/libgpushare.so)
tmp=$(mktemp -d)
cat >"$tmp/gpushared.json" <<JSON
{"socket": {"path": "$tmp/gpushared.sock"}, "production": [{"uid": 0}],
 "policy": {"default": "none"}, "tick_ms": 50}
JSON
ctl() { LD_LIBRARY_PATH=$lib "$bin/gpusharectl" --socket "$tmp/gpushared.sock" "$@"; }
LD_LIBRARY_PATH=$lib "$bin/gpushared" --config "$tmp/gpushared.json" >"$out/gpushared.log" 2>&1 &
daemon=$!
for _ in $(seq 50); do [ -S "$tmp/gpushared.sock" ] && break; sleep 0.1; done
job() { LD_PRELOAD=$shim GPUSHARE_SOCKET=$tmp/gpushared.sock GPUSHARE_JOB=$1 GPUSHARE_PRIORITY=$2 \
          python3 "$here/demo_job.py" --seconds 10 >"$out/$1.out" 2>"$out/$1.err" & }
job serve production; job train opportunistic
sleep 6
{ echo '$ gpusharectl jobs'; ctl jobs
  echo '$ gpusharectl set-priority train production'; ctl set-priority train production; echo "exit $?"
  sleep 0.5
  echo '$ gpusharectl jobs'; ctl jobs
  echo '$ gpusharectl status -o json'; ctl status -o json; } 2>&1 | tee "$out/ctl.txt"
wait %2 %3 2>/dev/null; sleep 0.5
echo '$ gpusharectl jobs  (after both exited)' | tee -a "$out/ctl.txt"; ctl jobs 2>&1 | tee -a "$out/ctl.txt"
kill $daemon; wait $daemon
tail -n 20 "$out/gpushared.log"; cat "$out/serve.out" "$out/train.out"
