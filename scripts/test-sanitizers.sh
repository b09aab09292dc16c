#!/usr/bin/env bash
# The sanitizer CI job, apart from .ci/run (it rebuilds the tree twice: ~1 h on 2 cores):
#   build-asan: daemon, shim and tests under AddressSanitizer + UBSan; every test suite.
#   build-tsan: the daemon and its tests under ThreadSanitizer; the daemon suites.
# Tests that preload the shim put libasan/libtsan first (tests/shim_preload.h).
#   usage: scripts/test-sanitizers.sh [asan|tsan]...   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
# detect_leaks: the daemon and the test processes are killed by signal in many tests, and the
# shim's globals live until exit by design; leaks are not what this job is after.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
status=0
for kind in "${@:-asan tsan}"; do
  for k in $kind; do
    case $k in
      asan) sanitize=address,undefined; targets=(all) ;;
      tsan) sanitize=thread
            targets=(gpushare_daemon_unit_tests gpushare_daemon_e2e_tests gpushare_mps_unit_tests
                     gpushare_mps_e2e_tests) ;;
      *) echo "usage: $0 [asan|tsan]..." >&2; exit 2 ;;
    esac
    build=build-$k
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSHARE_SANITIZE=$sanitize \
      -DGPUSHARE_BUILD_BENCH=OFF >/dev/null
    cmake --build "$build" -j"$jobs" --target "${targets[@]}"
    echo "== $k"
    if [ "$k" = asan ]; then
      ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 600 || status=1
    else  # only the daemon's suites are built: run their binaries, not the whole ctest list
      for t in "${targets[@]}"; do
        (cd "$build/tests/daemon" && "./$t") || status=1
      done
    fi
  done
done
exit $status
