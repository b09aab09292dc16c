#!/usr/bin/env python3
"""One workload alone, closed loop, for a fixed time: iterations per second. Prints one JSON line.

  python3 tools/bench/solo_rate.py --workload transformer_train_b16 --seconds 8

The loop is the harness's (worker.py's closed_loop): `in_flight_depth` iterations queued, each
waited for by its event. Used by gpu_round.sh's `solo-cost` part to set a workload's speed without
the shim against its speed as a production job under the shim, alternating runs (what the shim
itself costs a job, which the daemon's budget cannot see: its paused reference runs under it too).
"""
import argparse
import json
import os
import sys
import time
from collections import deque

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", required=True, help="a workloads.py name, e.g. transformer_train_b16")
    ap.add_argument("--seconds", type=float, default=8.0, help="the measured time")
    ap.add_argument("--warmup-s", type=float, default=3.0, help="iterations run and not measured first")
    args = ap.parse_args()
    spec = workloads.parse(args.workload)
    job = workloads.Job(spec)
    depth = spec.in_flight_depth
    pending = deque()

    def wait(event):  # None: the `sleep` workload, no GPU
        if event is not None:
            event.synchronize()

    def run_for(seconds):
        done, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            job.step()
            pending.append(job.record())
            if len(pending) >= depth:
                wait(pending.popleft())
                done += 1
            if spec.pause_ms:
                time.sleep(spec.pause_ms / 1000.0)
        while pending:
            wait(pending.popleft())
            done += 1
        return done

    run_for(args.warmup_s)
    start = time.perf_counter()
    steps = run_for(args.seconds)
    elapsed = time.perf_counter() - start
    print(json.dumps({"workload": args.workload, "steps": steps, "it_per_s": steps / elapsed}))


if __name__ == "__main__":
    main()
