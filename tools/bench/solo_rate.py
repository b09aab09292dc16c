#!/usr/bin/env python3
"""One workload alone, closed loop, for a fixed time: iterations per second. Prints one JSON line.

  python3 tools/bench/solo_rate.py --workload transformer_train_b16 --seconds 8

The loop is the harness's own (worker.py's closed_loop, counted as experiment.throughput counts a
window). Used by gpu_round.sh's `solo-cost` parts to set a workload's speed without the shim
against its speed as a production job under the shim, alternating runs (what the shim itself costs
a job, which the daemon's budget cannot see: its paused reference runs under it too).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402
from experiment import throughput  # noqa: E402
from worker import closed_loop  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", required=True, help="a workloads.py name, e.g. transformer_train_b16")
    ap.add_argument("--seconds", type=float, default=8.0, help="the measured time")
    ap.add_argument("--warmup-s", type=float, default=3.0, help="iterations run and not measured first")
    args = ap.parse_args()
    job = workloads.Job(workloads.parse(args.workload))
    now = time.time()
    closed_loop(job, now, now + args.warmup_s)
    start = time.time()
    result = closed_loop(job, start, start + args.seconds)
    print(json.dumps({"workload": args.workload, "it_per_s": throughput(result, args.seconds, args.seconds)}))


if __name__ == "__main__":
    main()
