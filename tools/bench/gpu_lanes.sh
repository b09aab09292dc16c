#!/usr/bin/env bash
# One call on a machine with several GPUs: each argument is a lane, a space-separated list of
# gpu_round.sh parts that runs on its own GPU (lane i on GPU i), all lanes at once. The GPU is named
# to CUDA by its UUID: an MPS control daemon started with CUDA_VISIBLE_DEVICES=1 numbers that GPU 0
# for its clients, so a client that keeps CUDA_VISIBLE_DEVICES=1 fails; with the UUID in both
# environments the harness's MPS daemons, gpushared's own (mps: auto) and every client agree.
# Every scenario still runs its baselines and isolated denominators on its own GPU in its lane, so
# no row is compared with one measured on another card.
#   tools/bench/gpu_lanes.sh "s1b" "s5-gappy-1s s5-saturating-1s"
# A word NAME=value in a lane is a setting of that lane alone (gpu_round.sh reads its settings from
# the environment, which the call's other lanes share):
#   tools/bench/gpu_lanes.sh "S5_CONTROLS=1 s5:mobilenet_v2_train_b16_p10:transformer_train_b32:3:1" "s3"
# Results: $OUT/laneI.tgz (gpu_round.sh's layout of lane I, its log and the cards) and $OUT/gpuI.log;
# table rows are printed as they come, so a call stopped at its limit still shows what it measured.
# Each lane runs under LANE_S seconds (default 540) and archives itself as soon as it ends or is
# stopped, so a lane cut short still returns its logs; the device tool returns at most 8 files, so
# nothing else is written at the top of $OUT (2026-11-26: a call stopped by an outer `timeout`
# before its archiving step returned no lane's tables or plots, and a ninth file crowded one out).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
out=${OUT:-/tmp/out}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$#" -gt "$gpus" ]; then
  echo "gpu_lanes: $# lanes but $gpus GPUs" >&2
  exit 2
fi
mapfile -t uuids < <(nvidia-smi --query-gpu=uuid --format=csv,noheader)
lane_s=${LANE_S:-540}
# Lane i's private folder (MPS pipes and logs, sockets): $BENCH_TMP_ROOT$i, default /tmp/bmpsI.
tmp_root=${BENCH_TMP_ROOT:-/tmp/bmps}
# Each lane on its own share of the host's cores: on the four-GPU host (64 cores) a launch-bound
# resnet50 b8 job's speed spread by a factor of 4 between windows with every lane's workers on
# every core (2026-11-26, S1b's isolated runs). LANE_CPUS=0 leaves the lanes unpinned.
mapfile -t cpus < <(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)), sep="\n")')
per_lane=$((${#cpus[@]} / $#))
pin() {  # lane index -> a taskset prefix, or nothing where pinning is off or would fail
  [ "${LANE_CPUS:-1}" = 0 ] || [ "$per_lane" -lt 2 ] && return
  local list
  list=$(IFS=,; echo "${cpus[*]:$(($1 * per_lane)):$per_lane}")
  taskset -c "$list" true 2>/dev/null && echo "taskset -c $list"
}
pids=()
i=0
for lane in "$@"; do
  settings=() parts=()
  for word in $lane; do  # shellcheck disable=SC2086  # a lane is a word list
    if [[ $word =~ ^[A-Z][A-Z0-9_]*= ]]; then settings+=("$word"); else parts+=("$word"); fi
  done
  mkdir -p "$out/gpu$i"
  nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm --format=csv >"$out/gpu$i/gpus.csv" 2>&1
  (
    # shellcheck disable=SC2046  # pin is a command prefix
    env "${settings[@]}" CUDA_VISIBLE_DEVICES="${uuids[$i]}" BENCH_GPU_INDEX=$i OUT="$out/gpu$i" BENCH_TMP="$tmp_root$i" \
      timeout --kill-after=10 "$lane_s" $(pin $i) bash tools/bench/gpu_round.sh "${parts[@]}" 2>&1 | tee "$out/gpu$i.log" \
      | grep --line-buffered '^|' | sed -u "s/^/lane $i /"
    rc=${PIPESTATUS[0]}
    # A part stopped by the limit has not quit its MPS control daemons either: quit them here, or
    # the next call's MPS rows fail (quit_mps.sh).
    bash tools/bench/quit_mps.sh "$tmp_root$i"
    # A part stopped mid-way has not archived its daemons' logs: do it here.
    for d in "$out/gpu$i"/*/logs; do
      [ -d "$d" ] && tar czf "$d-.tgz" -C "$d" . 2>/dev/null && mv "$d-.tgz" "${d%/logs}-logs.tgz" && rm -rf "$d"
    done
    cp "$out/gpu$i.log" "$out/gpu$i/lane.log"
    tar czf "$out/lane$i.tgz" -C "$out/gpu$i" . && rm -rf "${out:?}/gpu$i"
    exit "$rc"
  ) &
  pids+=($!)
  i=$((i + 1))
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for ((j = 0; j < i; j++)); do
  echo "=== lane $j (GPU $j, ${uuids[$j]})"
  grep -v '^\[' "$out/gpu$j.log" | tail -60
done
exit $status
