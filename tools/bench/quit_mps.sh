#!/usr/bin/env bash
# Quits every MPS control daemon whose pipe directory lies under DIR (a lane's BENCH_TMP: the
# harness's own in DIR/mps-pipe, and gpushared's with mps: auto in DIR/mps/pipe), each within 15 s.
#   tools/bench/quit_mps.sh /tmp/bmps0
# A part stopped by its lane's time limit does not get to quit the daemons it started, and a
# control daemon outlives the process group the limit kills: on the same machine the next call's
# MPS rows then fail ("nvidia-cuda-mps-control -d failed: rc 1", 2026-11-26 call 33, one part lost).
# Prints one line per daemon that did not quit; exits 0 either way (the lane's own status counts).
set -uo pipefail
dir=${1:?usage: quit_mps.sh DIR}
ctl=$(command -v nvidia-cuda-mps-control) || exit 0
find "$dir" -maxdepth 3 -type p -name control 2>/dev/null | while read -r pipe; do
  pipes=$(dirname "$pipe")
  echo quit | CUDA_MPS_PIPE_DIRECTORY="$pipes" timeout 15 "$ctl" >/dev/null 2>&1 ||
    echo "quit_mps: the MPS control daemon at $pipes did not quit within 15 s" >&2
done
exit 0
