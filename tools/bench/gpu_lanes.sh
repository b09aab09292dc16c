#!/usr/bin/env bash
# One call on a machine with several GPUs: each argument is a lane, a space-separated list of
# gpu_round.sh parts that runs on its own GPU (lane i on GPU i), all lanes at once. The GPU is named
# to CUDA by its UUID: an MPS control daemon started with CUDA_VISIBLE_DEVICES=1 numbers that GPU 0
# for its clients, so a client that keeps CUDA_VISIBLE_DEVICES=1 fails; with the UUID in both
# environments the harness's MPS daemons, gpushared's own (mps: auto) and every client agree.
# Every scenario still runs its baselines and isolated denominators on its own GPU in its lane, so
# no row is compared with one measured on another card.
#   tools/bench/gpu_lanes.sh "s1b" "s5-gappy-1s s5-saturating-1s"
# Results: $OUT/laneI.tgz (gpu_round.sh's layout of lane I); each lane's log also in $OUT/gpuI.log;
# table rows are printed as they come, so a call stopped at its limit still shows what it measured.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$#" -gt "$gpus" ]; then
  echo "gpu_lanes: $# lanes but $gpus GPUs" >&2
  exit 2
fi
mapfile -t uuids < <(nvidia-smi --query-gpu=uuid --format=csv,noheader)
pids=()
i=0
for lane in "$@"; do
  mkdir -p "$out/gpu$i"
  # shellcheck disable=SC2086  # a lane is a word list of parts
  CUDA_VISIBLE_DEVICES=${uuids[$i]} BENCH_GPU_INDEX=$i OUT="$out/gpu$i" BENCH_TMP="/tmp/bmps$i" \
    bash tools/bench/gpu_round.sh $lane 2>&1 | tee "$out/gpu$i.log" | grep --line-buffered '^|' | sed -u "s/^/lane $i /" &
  pids+=($!)
  i=$((i + 1))
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
# The device tool returns at most 8 files, 2 folders down: one archive per lane.
for ((j = 0; j < i; j++)); do
  tar czf "$out/lane$j.tgz" -C "$out/gpu$j" . && rm -rf "${out:?}/gpu$j"
done
for ((j = 0; j < i; j++)); do
  echo "=== lane $j (GPU $j, ${uuids[$j]})"
  grep -v '^\[' "$out/gpu$j.log" | tail -60
done
exit $status
