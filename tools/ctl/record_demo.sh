#!/usr/bin/env bash
# The timeline of docs/metrics.md (docs/timeline.png), recorded with the fake driver: serve-a
# (production) alone, train-b (opportunistic) joins, tgs target=0.9 from 2 s, train-b raised to
# production at 4 s. Run from the repository root after a build; prints the folder of trace.json.
set -u
B=${B:-$PWD/build}
D=$(mktemp -d /tmp/gpushare-timeline.XXXX)
cat > $D/gpushared.json <<JSON
{ "socket": { "path": "$D/gpushared.sock", "mode": "0666" },
  "production": [ { "uid": $(id -u), "job": "serve-*" } ],
  "memory": { "capacity": "1G" } }
JSON
$B/daemon/gpushared --config $D/gpushared.json 2> $D/daemon.log &
DPID=$!
sleep 0.5
export GPUSHARE_SOCKET=$D/gpushared.sock
run_job() {
  GPUSHARE_JOB=$1 GPUSHARE_PRIORITY=$2 LD_PRELOAD=$B/shim/libgpushare.so \
  LD_LIBRARY_PATH=$B/tests/fake_driver GPUSHARE_FAKE_DEVICE_FILE=$D/device \
    $B/tests/clients/client_workload --kernel-us 500 --seconds $3 --alloc-bytes $4 > /dev/null 2>&1 &
}
run_job serve-a production 7 268435456
P1=$!
sleep 1
$B/tools/ctl/gpusharectl record --seconds 6 -o $D/trace.json &
RPID=$!
sleep 0.5
run_job train-b opportunistic 5 134217728
P2=$!
sleep 1.5
$B/tools/ctl/gpusharectl policy 0 tgs target=0.9
sleep 2
$B/tools/ctl/gpusharectl set-priority train-b production
wait $RPID
wait $P1 $P2 2>/dev/null
kill $DPID; wait $DPID
echo $D
