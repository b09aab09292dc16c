#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang in a build folder of their own and runs each
# for a bounded time on a copy of the seed corpus. CI runs it with the default 20 s per target;
# a longer run: scripts/fuzz.sh 600. Exits non-zero when a target finds a crash (the input is left
# in build-fuzz/crashes/).
#   usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
build=${2:-build-fuzz}
jobs=$(nproc 2>/dev/null || echo 2)
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSHARE_FUZZ=ON \
  -DGPUSHARE_BUILD_TESTS=OFF -DGPUSHARE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target fuzz_frame fuzz_config
mkdir -p "$build/crashes"
status=0
for target in frame config; do
  # libFuzzer adds what it finds to the first corpus folder: a scratch copy, not the checked-in seeds.
  corpus="$build/corpus-$target"
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/"$target"/* "$corpus"/ 2>/dev/null || true
  echo "== fuzz_$target for ${seconds} s"
  if ! "$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
      -artifact_prefix="$build/crashes/$target-" -print_final_stats=1 "$corpus" \
      2>"$build/fuzz_$target.log"; then
    status=1
    tail -40 "$build/fuzz_$target.log"
  fi
  grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^Done ' "$build/fuzz_$target.log" || true
done
exit $status
