#!/usr/bin/env bash
# One call on the GPU machine: the carried binaries (.carry/, built here), then the named parts, each
# writing under $OUT as it goes so that a call stopped at its limit still returns what it measured.
#   tools/bench/gpu_round.sh launch-rate s1a ...     (parts: below)
# Every scenario runs the baselines the comparison needs (MPS with client priority always) beside
# the gpushare rows, with its isolated denominators, in the same call.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
out=${OUT:-/tmp/out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
carry=$(realpath .carry)
D="LD_LIBRARY_PATH=$carry/lib $carry/bin/gpushared --config {config}"
G=(--shim "$carry/libgpushare.so" --gpushare-daemon "$D" --tmp "${BENCH_TMP:-/tmp/bmps}")
# Every part's daemons log each tick (their modes and gates), unless GPUSHARE_BENCH_TRACE=0: a
# GPU call is scarce, and a row without its ticks cannot be diagnosed afterwards (2026-11-25: an
# S5 row that harvested nothing, run without them, had to be explained from a model).
[ "${GPUSHARE_BENCH_TRACE:-1}" != 0 ] && G+=(--gpushare-log-level trace)
# BENCH_SKIP: more baselines to leave out (a short check; every round of record keeps them).
# S1_SKIP: the same for S1a and S1b alone (default: BENCH_SKIP), so that S1a can keep the
# thread-limit rows its frontier is drawn from while the other parts leave them out.
# S1_REPS: repetitions of S1a and S1b (default 3); REPS: of S5 and S3; S2_REPS, S2_BUDGET, S2_LIMIT:
# S2's repetitions (default 3), time budget (520 s) and limit (570 s); S2_LOADS: the resnet50
# server's loads (default "0.3 0.5"; "1.5 0.5" gives each daemon a server whose queue stays full
# for a window before one with gaps, in the order each repetition shuffles its windows into); on
# a host of several lanes the servers' own tail was 14 times their p50 (2026-11-27, call 72), so
# S2's tail wants more repetitions on one GPU (tools/bench/s2_tail.py pools them). S1_LATE: S1a's
# and S1b's NT also over the window after that many seconds (run.py --late-s).
# S5_WINDOW, S5_BUDGET, S5_LIMIT: the S5 parts' window, time budget and limit (seconds; defaults
# below); S5_LATE: their NT also over the window after that many seconds (run.py --late-s), e.g. a
# 20 s window with S5_LATE=6 tells a fresh daemon's learning from how it shares afterwards.
# S5_CONTROLS=1: the S5 parts also run production alone as an MPS client and under the shim
# (run.py --prod-controls; two more windows a repetition).
S5_OPTS=(--late-s "${S5_LATE:-0}")
[ "${S5_CONTROLS:-0}" = 1 ] && S5_OPTS+=(--prod-controls)
read -ra extra_skip <<<"${BENCH_SKIP:-}"
read -ra s1_skip <<<"${S1_SKIP-${BENCH_SKIP:-}}"
ROWS=(--skip sequential streams ticktock mps-thr30 "${extra_skip[@]}")
S1_ROWS=(--skip sequential streams ticktock mps-thr30 "${s1_skip[@]}")
# GPUSHARE_POLICIES overrides the gpushare rows (space-separated, e.g. "harvest priority:kernel_gating=1").
read -ra policies <<<"${GPUSHARE_POLICIES:-tgs harvest harvest@mps-prio}"
read -ra s3_policies <<<"${S3_POLICIES:-${policies[*]}}"
# Read here and not passed on: a worker's shim warns of every GPUSHARE_ variable it does not know.
unset GPUSHARE_POLICIES S3_POLICIES
POLICIES=(--gpushare-policy "${policies[@]}")
# Each lane of gpu_lanes.sh shuffles its rows in an order of its own (the seed is the lane's GPU
# index), so that no row meets the other lanes' load in the same way on every lane: with one order
# everywhere, two lanes of the same pair (2026-11-26, four-GPU host) ran their isolated
# transformer_train_b16 rows at 11.2 ms per step in two repetitions of three, where every other
# row of theirs, and that row in the third repetition, took 14-16 ms.
# FRESH_REPS=1: each repetition starts the gpushare rows' daemons and jobs afresh (run.py
# --fresh-gpushare), so that a part's repetitions are independent runs of the policy's learning.
bench() {
  timeout "$1" python3 tools/bench/run.py --seed "${BENCH_GPU_INDEX:-0}" ${FRESH_REPS:+--fresh-gpushare} "${@:2}" 2>&1 |
    tee -a "$out/log.txt" | grep -v '^\['
}
# The daemons' logs of a part in one archive (their names hold ':' and '@', which the GPU
# machine does not return).
# A part without daemon logs (crosscheck, launch-rate) leaves none: that is no failure (2026-11-26: a
# lane of the cross-check alone ended with rc 2 from the unmatched pattern).
logs() {
  local d
  for d in "$out"/*/logs; do
    [ -d "$d" ] || continue
    tar czf "$d-.tgz" -C "$d" . 2>/dev/null && mv "$d-.tgz" "${d%/logs}-logs.tgz"
  done
  return 0
}

# The launch-rate and solo-cost checks: a gpushared for them, its socket ready (its pid in
# rate_daemon_pid), with the policy's parameters given as JSON (default: none) and the policy
# (default: harvest).
start_rate_daemon() {  # daemon binary, socket, log, [parameters], [policy]
  printf '{"socket": {"path": "%s"}, "production": [{"uid": 0}], "policy": {"default": "%s", "parameters": {"%s": %s}}, "tick_ms": 50}\n' \
    "$2" "${5:-harvest}" "${5:-harvest}" "${4:-"{}"}" >"$2.json"
  LD_LIBRARY_PATH=$carry/lib "$1" --config "$2.json" >"$3" 2>&1 &
  rate_daemon_pid=$!
  for _ in $(seq 50); do [ -S "$2" ] && break; sleep 0.1; done
}
# One run of a program printing one JSON line (default: the PyTorch add_ loop), as a JSON line
# labelled `run`: without the shim (socket ""), or as a production job of the daemon at the socket.
rate_run() {  # label, [socket], [command...]
  local label=$1 socket=${2:-} line
  shift; shift || true
  [ "$#" -gt 0 ] || set -- python3 tools/crosscheck/launch_rate.py
  if [ -z "$socket" ]; then
    line=$(timeout 60 "$@")
  else
    line=$(LD_PRELOAD=$carry/libgpushare.so GPUSHARE_SOCKET=$socket GPUSHARE_PRIORITY=production \
      GPUSHARE_REQUIRE_DAEMON=1 GPUSHARE_QUIET=1 timeout 60 "$@")
  fi
  echo "{\"run\": \"$label\", ${line#\{}"
}
# Each run's median [min-max] of the field given (default launches_per_s) and its ratio to the
# first run's median.
rate_summary() {  # [field]
  python3 -c '
import json, statistics, sys
key = sys.argv[1]
rows = [json.loads(l) for l in sys.stdin if l.strip()]
runs = list(dict.fromkeys(r["run"] for r in rows))
med = {run: statistics.median(r[key] for r in rows if r["run"] == run) for run in runs}
for run in runs:
    v = [r[key] for r in rows if r["run"] == run]
    print(f"{run}: {key} median {med[run]:,.1f} [{min(v):,.1f}-{max(v):,.1f}], {med[run] / med[runs[0]]:.3f} of {runs[0]}")' \
    "${1:-launches_per_s}"
}

launch_rate() {
  # PyTorch add_ launches/s without the shim and with it as a registered production job (its
  # completion marks on), alternating, 5 runs each.
  local tmp; tmp=$(mktemp -d)
  start_rate_daemon "$carry/bin/gpushared" "$tmp/s.sock" "$out/launch-rate-daemon.log"
  local daemon=$rate_daemon_pid
  for _ in $(seq 5); do
    rate_run "no shim"
    rate_run "production under the shim" "$tmp/s.sock"
  done | tee "$out/launch-rate.jsonl" | rate_summary | tee "$out/launch-rate.txt"
  kill "$daemon"; wait "$daemon"
}

# A program (default: the add_ loop) as production beside an idle opportunistic job, under each
# daemon build in .carry/bin named gpushared* (e.g. the installed one and candidates) with the
# harvest parameters given, against the program without the shim; alternating, ROUNDS runs each.
# Results: $out/NAME.jsonl and NAME.txt, summarised by FIELD.
beside_by_build() {  # harvest parameters, name, field, [command...]
  local params=$1 name=$2 field=$3; shift 3
  local tmp; tmp=$(mktemp -d); local pids=() names=() i=0 d j
  for d in "$carry"/bin/gpushared*; do
    start_rate_daemon "$d" "$tmp/s$i.sock" "$out/$name-$i.log" "$params"
    pids+=("$rate_daemon_pid"); names+=("$(basename "$d")")
    idle_opportunistic "$tmp/s$i.sock"
    pids+=("$idle_pid")
    i=$((i + 1))
  done
  sleep 15  # the opportunistic jobs registered and the budget rotating
  for _ in $(seq "${ROUNDS:-5}"); do
    rate_run "no shim" "" "$@"
    for j in $(seq 0 $((i - 1))); do rate_run "${names[$j]}" "$tmp/s$j.sock" "$@"; done
  done | tee "$out/$name.jsonl" | rate_summary "$field" | tee "$out/$name.txt"
  kill "${pids[@]}" 2>/dev/null; for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  return 0  # the stopped jobs' statuses are no failure of the check
}

# An opportunistic job of the daemon at the socket given that registers and then does nothing until
# its part stops it (the budget then measures production in every period); its pid in idle_pid.
# Its own limit (900 s) is longer than any lane's (at most 600 s): it never leaves mid-part.
idle_opportunistic() {  # socket
  LD_PRELOAD=$carry/libgpushare.so GPUSHARE_SOCKET=$1 GPUSHARE_PRIORITY=opportunistic GPUSHARE_QUIET=1 \
    timeout 900 python3 -c 'import time, torch; torch.zeros(1, device="cuda"); torch.cuda.synchronize(); time.sleep(890)' &
  idle_pid=$!
}

solo_cost() {  # workload
  # What the shim costs a workload alone (its iterations per second, tools/bench/solo_rate.py):
  # without the shim; as a production job under `priority` (hooks and registration, no signal);
  # under the installed harvest alone; and under it beside an idle opportunistic job (the budget
  # measuring: completion marks and fast polls). No MPS. Alternating, ROUNDS runs each (default 3).
  local tmp; tmp=$(mktemp -d); local pids=() run=(python3 tools/bench/solo_rate.py --workload "$1" --seconds 5 --warmup-s 2)
  local harvest='{"kernel_gating": 1, "in_flight": 4, "concurrency": 2}'
  start_rate_daemon "$carry/bin/gpushared" "$tmp/p.sock" "$out/solo-cost-$1-priority.log" '{}' priority
  pids+=("$rate_daemon_pid")
  start_rate_daemon "$carry/bin/gpushared" "$tmp/h.sock" "$out/solo-cost-$1-harvest.log" "$harvest"
  pids+=("$rate_daemon_pid")
  start_rate_daemon "$carry/bin/gpushared" "$tmp/b.sock" "$out/solo-cost-$1-beside.log" "$harvest"
  idle_opportunistic "$tmp/b.sock"
  pids+=("$rate_daemon_pid" "$idle_pid")
  sleep 10  # the opportunistic job registered
  for _ in $(seq "${ROUNDS:-3}"); do
    rate_run "no shim" "" "${run[@]}"
    rate_run "priority" "$tmp/p.sock" "${run[@]}"
    rate_run "harvest alone" "$tmp/h.sock" "${run[@]}"
    rate_run "harvest beside an idle opportunistic job" "$tmp/b.sock" "${run[@]}"
  done | tee "$out/solo-cost-$1.jsonl" | rate_summary it_per_s | tee "$out/solo-cost-$1.txt"
  kill "${pids[@]}" 2>/dev/null; for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  return 0
}

for part in "$@"; do
  echo "=== $part $(date -u +%T)" | tee -a "$out/log.txt"
  case $part in
    launch-rate) launch_rate ;;
    # The add_ loop beside an idle opportunistic job under the budget (harvest concurrency=1: it
    # measures production in every period), by daemon build.
    launch-rate-beside) beside_by_build '{"kernel_gating": 1, "in_flight": 4, "concurrency": 1}' \
                          launch-rate-beside launches_per_s ;;
    # A workload beside an idle opportunistic job under the installed harvest (no MPS: kernel
    # gating, production's completion marks every 4 launches), by daemon build.
    solo-cost-builds:*) beside_by_build '{"kernel_gating": 1, "in_flight": 4, "concurrency": 2}' \
          "solo-cost-builds-${part#solo-cost-builds:}" it_per_s \
          python3 tools/bench/solo_rate.py --workload "${part#solo-cost-builds:}" --seconds 5 --warmup-s 2 ;;
    s1a) bench 560 --scenario S1 --out "$out/s1a" --window "${S1_WINDOW:-8}" --reps "${S1_REPS:-3}" --budget-s "${S1_BUDGET:-500}" "${S1_ROWS[@]}" \
           --late-s "${S1_LATE:-0}" "${G[@]}" --gpushare-log-level trace "${POLICIES[@]}" ;;
    s1b) bench 560 --scenario S1 --out "$out/s1b" --prod resnet50_train_b8 --window "${S1_WINDOW:-8}" --reps "${S1_REPS:-3}" --budget-s "${S1_BUDGET:-500}" \
           "${S1_ROWS[@]}" --late-s "${S1_LATE:-0}" "${G[@]}" --gpushare-log-level trace "${POLICIES[@]}" ;;
    s2) bench "${S2_LIMIT:-570}" --scenario S2 --out "$out/s2" --window 4 --reps "${S2_REPS:-3}" --loads ${S2_LOADS:-0.3 0.5} \
          --budget-s "${S2_BUDGET:-520}" "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s2-transformer) bench "${S2_LIMIT:-570}" --scenario S2 --out "$out/s2t" --prod transformer_infer_b8 --window 4 \
          --reps "${S2_REPS:-3}" --loads 0.3 0.5 --budget-s "${S2_BUDGET:-520}" "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s5-gappy-1s) bench "${S5_LIMIT:-280}" --scenario S5 --out "$out/s5g1" --prod resnet50_train_b8 --window "${S5_WINDOW:-6}" --reps "${REPS:-3}" \
          --on-s 1 --off-s 1 --budget-s "${S5_BUDGET:-250}" "${S5_OPTS[@]}" "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s5-saturating-4s) bench "${S5_LIMIT:-300}" --scenario S5 --out "$out/s5s4" --prod resnet50_train_b32 --window "${S5_WINDOW:-8}" --reps "${REPS:-3}" \
          --on-s 4 --off-s 4 --budget-s "${S5_BUDGET:-270}" "${S5_OPTS[@]}" "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s5-gappy-4s) bench "${S5_LIMIT:-300}" --scenario S5 --out "$out/s5g4" --prod resnet50_train_b8 --window "${S5_WINDOW:-8}" --reps "${REPS:-3}" \
          --on-s 4 --off-s 4 --budget-s "${S5_BUDGET:-270}" "${S5_OPTS[@]}" "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s5-saturating-1s) bench "${S5_LIMIT:-280}" --scenario S5 --out "$out/s5s1" --prod resnet50_train_b32 --window "${S5_WINDOW:-6}" --reps "${REPS:-3}" \
          --on-s 1 --off-s 1 --budget-s "${S5_BUDGET:-250}" "${S5_OPTS[@]}" "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s5-transformer) bench "${S5_LIMIT:-280}" --scenario S5 --out "$out/s5t" --prod transformer_infer_b8 --window "${S5_WINDOW:-6}" --reps "${REPS:-3}" \
          --on-s 1 --off-s 1 --budget-s "${S5_BUDGET:-250}" "${S5_OPTS[@]}" "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    # S3 starts and stops 36 workers: after its 270 s of windows, stopping them and writing the
    # table took more than the 30 s left by a 300 s limit (2026-11-24 and 2026-11-25: no table).
    # S3_POLICIES: its gpushare rows, when they differ from the other parts' (space-separated);
    # S3_LIMIT, S3_BUDGET: for more repetitions (REPS), keeping the 150 s between them.
    s3) bench "${S3_LIMIT:-420}" --scenario S3 --out "$out/s3" --window 4 --reps "${REPS:-3}" --budget-s "${S3_BUDGET:-270}" "${G[@]}" \
          --gpushare-policy "${s3_policies[@]}" ;;
    # Rotation: three training jobs needing about twice what a 16 GiB capacity leaves after production.
    s7) bench 570 --scenario S7 --out "$out/s7" --capacity 16G --budget-s 520 "${G[@]}" \
          --gpushare-sim "$carry/bin/gpushare-sim" ;;
    # Any pair of workloads (tools/bench/workloads.py names), for a check beyond the parts above:
    #   s5:PROD:OPP:ON_S:OFF_S    e.g. s5:transformer_train_b16:resnet50_train_b32:2:0.5
    #   s1:PROD:OPP               e.g. s1:transformer_train_b8:mobilenet_v2_train_b64
    # The window holds at least three on/off periods (6-12 s).
    s5:*:*:*:*)
      IFS=: read -r _ prod opp on off <<<"$part"
      window=$(python3 -c "print(min(12.0, max(6.0, 3 * ($on + $off))))")
      bench "${S5_LIMIT:-300}" --scenario S5 --out "$out/s5-$prod-$opp-$on-$off" --prod "$prod" --opp "$opp" --window "$window" \
        --reps "${REPS:-3}" --on-s "$on" --off-s "$off" --budget-s "${S5_BUDGET:-270}" "${S5_OPTS[@]}" "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s1:*:*)
      IFS=: read -r _ prod opp <<<"$part"
      bench 560 --scenario S1 --out "$out/s1-$prod-$opp" --prod "$prod" --opp "$opp" --window "${S1_WINDOW:-8}" \
        --reps "${S1_REPS:-3}" --budget-s "${S1_BUDGET:-500}" "${S1_ROWS[@]}" "${G[@]}" "${POLICIES[@]}" ;;
    # What the shim costs a workload alone, by policy (solo_cost above).
    solo-cost:*) solo_cost "${part#solo-cost:}" ;;
    # Whether another MPS client slows production while it does nothing (tools/bench/mps_neighbour.py).
    mps-neighbour:*:*)
      IFS=: read -r _ prod opp <<<"$part"
      timeout 300 python3 tools/bench/mps_neighbour.py --prod "$prod" --opp "$opp" --rounds "${REPS:-3}" \
        --out "$out/mps-neighbour-$prod.json" 2>&1 | tee -a "$out/log.txt" ;;
    # The interception cross-check (tools/crosscheck/run_gpu.sh): PyTorch, cuBLAS, cuDNN, CUDA
    # graphs, CuPy, Triton, JAX and CUDA C++ counted against CUPTI, outputs bit for bit.
    crosscheck) RATE_RUNS=${RATE_RUNS:-0} timeout 400 bash tools/crosscheck/run_gpu.sh "$carry/libgpushare.so" "$out/crosscheck" ;;
    *) echo "unknown part $part" ;;
  esac
  logs
done
