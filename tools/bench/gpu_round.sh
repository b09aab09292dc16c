#!/usr/bin/env bash
# One call on the GPU machine: the carried binaries (.carry/, built here), then the named parts, each
# writing under $OUT as it goes so that a call stopped at its limit still returns what it measured.
#   tools/bench/gpu_round.sh launch-rate s1a ...     (parts: below)
# Every scenario runs the baselines the comparison needs (MPS with client priority always) beside
# the gpushare rows, with its isolated denominators, in the same call.
set -uo pipefail
cd "$(dirname "$0")/../.."
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
# S1_REPS: repetitions of S1a and S1b (default 3); REPS: of S5 and S3.
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
bench() { timeout "$1" python3 tools/bench/run.py "${@:2}" 2>&1 | tee -a "$out/log.txt" | grep -v '^\[' ; }
# The daemons' logs of a part in one archive (their names hold ':' and '@', which the GPU
# machine does not return).
logs() { for d in "$out"/*/logs; do tar czf "$d-.tgz" -C "$d" . 2>/dev/null && mv "$d-.tgz" "${d%/logs}-logs.tgz"; done; }

launch_rate() {
  # PyTorch add_ launches/s without the shim and with it as a registered production job (its
  # completion marks on), alternating, 5 runs each.
  local tmp; tmp=$(mktemp -d)
  printf '{"socket": {"path": "%s"}, "production": [{"uid": 0}], "policy": {"default": "harvest"}, "tick_ms": 50}\n' \
    "$tmp/s.sock" >"$tmp/c.json"
  LD_LIBRARY_PATH=$carry/lib "$carry/bin/gpushared" --config "$tmp/c.json" >"$out/launch-rate-daemon.log" 2>&1 &
  local daemon=$!
  for _ in $(seq 50); do [ -S "$tmp/s.sock" ] && break; sleep 0.1; done
  for i in $(seq 5); do
    echo "{\"shim\": false, $(timeout 60 python3 tools/crosscheck/launch_rate.py | sed 's/^{//')"
    echo "{\"shim\": true, $(LD_PRELOAD=$carry/libgpushare.so GPUSHARE_SOCKET=$tmp/s.sock GPUSHARE_PRIORITY=production \
      GPUSHARE_REQUIRE_DAEMON=1 GPUSHARE_QUIET=1 timeout 60 python3 tools/crosscheck/launch_rate.py | sed 's/^{//')"
  done | tee "$out/launch-rate.jsonl" | python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
off = [r["launches_per_s"] for r in rows if not r["shim"]]
on = [r["launches_per_s"] for r in rows if r["shim"]]
print("without:", " ".join(f"{x:,.0f}" for x in off))
print("production under the shim:", " ".join(f"{x:,.0f}" for x in on))
print(f"median without {statistics.median(off):,.0f}/s, with {statistics.median(on):,.0f}/s, ratio {statistics.median(on)/statistics.median(off):.3f}")' \
    | tee "$out/launch-rate.txt"
  kill $daemon; wait $daemon
}

for part in "$@"; do
  echo "=== $part $(date -u +%T)" | tee -a "$out/log.txt"
  case $part in
    launch-rate) launch_rate ;;
    s1a) bench 560 --scenario S1 --out "$out/s1a" --window "${S1_WINDOW:-8}" --reps "${S1_REPS:-3}" --budget-s "${S1_BUDGET:-500}" "${S1_ROWS[@]}" \
           "${G[@]}" --gpushare-log-level trace "${POLICIES[@]}" ;;
    s1b) bench 560 --scenario S1 --out "$out/s1b" --prod resnet50_train_b8 --window "${S1_WINDOW:-8}" --reps "${S1_REPS:-3}" --budget-s "${S1_BUDGET:-500}" \
           "${S1_ROWS[@]}" "${G[@]}" --gpushare-log-level trace "${POLICIES[@]}" ;;
    s2) bench 570 --scenario S2 --out "$out/s2" --window 4 --reps 3 --loads 0.3 0.5 --budget-s 520 \
          "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s2-transformer) bench 570 --scenario S2 --out "$out/s2t" --prod transformer_infer_b8 --window 4 --reps 3 \
          --loads 0.3 0.5 --budget-s 520 "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s5-gappy-1s) bench 280 --scenario S5 --out "$out/s5g1" --prod resnet50_train_b8 --window 6 --reps "${REPS:-3}" \
          --on-s 1 --off-s 1 --budget-s 250 "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s5-saturating-4s) bench 300 --scenario S5 --out "$out/s5s4" --prod resnet50_train_b32 --window 8 --reps "${REPS:-3}" \
          --on-s 4 --off-s 4 --budget-s 270 "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s5-gappy-4s) bench 300 --scenario S5 --out "$out/s5g4" --prod resnet50_train_b8 --window 8 --reps "${REPS:-3}" \
          --on-s 4 --off-s 4 --budget-s 270 "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s5-saturating-1s) bench 280 --scenario S5 --out "$out/s5s1" --prod resnet50_train_b32 --window 6 --reps "${REPS:-3}" \
          --on-s 1 --off-s 1 --budget-s 250 "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    s5-transformer) bench 280 --scenario S5 --out "$out/s5t" --prod transformer_infer_b8 --window 6 --reps "${REPS:-3}" \
          --on-s 1 --off-s 1 --budget-s 250 "${ROWS[@]}" mps-thr20 "${G[@]}" "${POLICIES[@]}" ;;
    # S3 starts and stops 36 workers: after its 270 s of windows, stopping them and writing the
    # table took more than the 30 s left by a 300 s limit (2026-11-24 and 2026-11-25: no table).
    # S3_POLICIES: its gpushare rows, when they differ from the other parts' (space-separated).
    s3) bench 420 --scenario S3 --out "$out/s3" --window 4 --reps "${REPS:-3}" --budget-s 270 "${G[@]}" \
          --gpushare-policy "${s3_policies[@]}" ;;
    # Rotation: three training jobs needing about twice what a 16 GiB capacity leaves after production.
    s7) bench 570 --scenario S7 --out "$out/s7" --capacity 16G --budget-s 520 "${G[@]}" \
          --gpushare-sim "$carry/bin/gpushare-sim" ;;
    *) echo "unknown part $part" ;;
  esac
  logs
done
