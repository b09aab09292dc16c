#!/usr/bin/env bash
# Builds gpushare and runs its main job on a simulated GPU (the fake driver of tests/, so no GPU
# is needed): gpushared with the `harvest` policy (the installed default), a production and an
# opportunistic job under the shim, `gpusharectl jobs`, a priority change, and each job's
# throughput against its rate alone.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target gpushare gpushared gpusharectl gpushare_fake_cuda gpushare_fake_nvml \
  client_workload

work=$(mktemp -d)
daemon_pid=
cleanup() { [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cat >"$work/gpushared.json" <<JSON
{ "socket": { "path": "$work/gpushared.sock" },
  "production": [ { "uid": $(id -u) } ],
  "policy": { "default": "harvest", "parameters": { "harvest": { "kernel_gating": 1, "in_flight": 4, "concurrency": 2 } } },
  "tick_ms": 50 }
JSON
ctl() { build/tools/ctl/gpusharectl --socket "$work/gpushared.sock" "$@"; }
job() {  # name class seconds: a job of 2 ms kernels on the simulated GPU, under the shim
  # Asynchronous kernels, as on a GPU: a launch returns at once and the kernel runs after it.
  env GPUSHARE_FAKE_ASYNC_KERNELS=1 LD_PRELOAD="$PWD/build/shim/libgpushare.so" \
      LD_LIBRARY_PATH="$(dirname "$(find build/tests/fake_driver -name 'libcuda.so.1' | head -n1)")" \
      GPUSHARE_FAKE_DEVICE_FILE="$work/gpu" GPUSHARE_SOCKET="$work/gpushared.sock" \
      GPUSHARE_JOB="$1" GPUSHARE_PRIORITY="$2" GPUSHARE_QUIET=1 \
      build/tests/clients/client_workload --kernel-us 2000 --settle-seconds 2 --seconds "$3" \
        --sync-every-step
}
rate() { python3 -c 'import json,sys; print(round(json.loads(sys.stdin.read())["kernels_per_s"]))'; }

echo "== each job alone on the simulated GPU (no daemon: the shim runs pass-through)"
alone=$(job train opportunistic 2 2>/dev/null | rate)
echo "   $alone kernels/s"

echo "== gpushared with the harvest policy; a production and an opportunistic job share the GPU"
# The daemon reads the simulated GPU's inventory (which UUID is which device) from the fake NVML,
# as it would read the real one.
LD_LIBRARY_PATH="$(dirname "$(find build/tests/fake_driver -name 'libnvidia-ml.so.1' | head -n1)")" \
  GPUSHARE_FAKE_DEVICE_FILE="$work/gpu" \
  build/daemon/gpushared --config "$work/gpushared.json" >"$work/gpushared.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 50); do [ -S "$work/gpushared.sock" ] && break; sleep 0.1; done
job serve production 6 >"$work/serve.json" & serve_pid=$!
job train opportunistic 6 >"$work/train.json" & train_pid=$!
sleep 4
echo "\$ gpusharectl jobs"; ctl jobs
echo "\$ gpusharectl status"; ctl status
wait "$serve_pid" "$train_pid"
serve=$(rate <"$work/serve.json"); train=$(rate <"$work/train.json")
echo "   production    (serve): $serve kernels/s = $(python3 -c "print(f'{$serve/$alone:.2f}')") of its rate alone"
echo "   opportunistic (train): $train kernels/s = $(python3 -c "print(f'{$train/$alone:.2f}')") of its rate alone"
echo "   (without gpushared both would get about 0.5: the simulated GPU runs one kernel at a time)"

echo "== a priority change while two jobs compete: the production job is demoted"
job serve production 8 >/dev/null & serve_pid=$!
job train opportunistic 8 >/dev/null & train_pid=$!
rates() {
  ctl jobs -o json | python3 -c 'import json, sys
for j in json.load(sys.stdin)["jobs"]:
    print("   %-6s %-14s %5.0f kernels/s" % (j["job"], j["class"], j["kernels_per_s"]))'
}
sleep 4
echo "   before:"; rates
echo "\$ gpusharectl set-priority serve opportunistic"; ctl set-priority serve opportunistic
sleep 3
echo "   after (both opportunistic: they share the simulated GPU):"; rates
wait "$serve_pid" "$train_pid"
echo "== the daemon's log"
cat "$work/gpushared.log"
