"""Does another MPS client slow a production job even while it does nothing?

The concurrency budget (policies/src/concurrency_budget.h) measures what running an opportunistic
job costs production against production's speed while that job is paused. On the H100
(2026-11-26) a launch-bound transformer training job under MPS ran at the same speed in the
budget's paused and beside periods, yet 22 % below its solo speed: the paused reference is solo
only if a paused MPS neighbour costs nothing. This measures that directly, in one process per
substrate and neighbours started, stopped (SIGSTOP: no launches, its queue drains) and killed:

  plain            production alone, not an MPS client
  mps              production alone as an MPS client
  mps+idle         beside a second MPS client that holds a context and does nothing
  mps+busy-prio    beside an MPS client at CUDA_MPS_CLIENT_PRIORITY=1 running the opportunistic job
  mps+stopped      the same neighbour stopped with SIGSTOP (what the budget's paused period is)
  plain+stopped    not MPS: a plain neighbour running, then stopped (time-slicing's paused)

Usage (on the GPU machine, from the repository root):
  python3 tools/bench/mps_neighbour.py --prod transformer_train_b16 --opp resnet50_train_b32 \
      --window 4 --rounds 3 --out $OUT/mps-neighbour.json
Prints one line per measurement and a table (median it/s and ratio to `plain`) last.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Each process runs mps_neighbour_child.py in a fresh interpreter, its substrate set by its
# environment before CUDA starts.
CHILD = os.path.join(HERE, "mps_neighbour_child.py")


class Child:
    def __init__(self, mode, name, env):
        self.proc = subprocess.Popen([sys.executable, CHILD, mode, name], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"{mode} {name}: did not start ({line!r})")

    def run(self, seconds):
        self.proc.stdin.write(f"run {seconds}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prod", default="transformer_train_b16")
    ap.add_argument("--opp", default="resnet50_train_b32")
    ap.add_argument("--window", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()

    root = tempfile.mkdtemp(prefix="mpsn-")
    pipe, logs, empty = (os.path.join(root, d) for d in ("pipe", "log", "none"))
    for d in (pipe, logs, empty):
        os.makedirs(d)
    ctl = shutil.which("nvidia-cuda-mps-control")
    mps_env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipe, CUDA_MPS_LOG_DIRECTORY=logs)
    plain_env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=empty)
    subprocess.run([ctl, "-d"], env=mps_env, check=True, timeout=30)
    rows = []
    children = []
    try:
        prod_plain = Child("serve", args.prod, plain_env)
        prod_mps = Child("serve", args.prod, mps_env)
        children += [prod_plain, prod_mps]

        def measure(config, prod):
            its = prod.run(args.window)
            rows.append({"config": config, "its": its})
            print(f"{config:14s} {its:7.2f} it/s", flush=True)

        for _ in range(args.rounds):
            measure("plain", prod_plain)
            measure("mps", prod_mps)
            idle = Child("idle", args.prod, mps_env)
            measure("mps+idle", prod_mps)
            idle.stop()
            busy = Child("loop", args.opp, dict(mps_env, CUDA_MPS_CLIENT_PRIORITY="1"))
            time.sleep(1)
            measure("mps+busy-prio", prod_mps)
            busy.signal(signal.SIGSTOP)
            time.sleep(0.5)
            measure("mps+stopped", prod_mps)
            busy.stop()
            plain_busy = Child("loop", args.opp, plain_env)
            time.sleep(1)
            plain_busy.signal(signal.SIGSTOP)
            time.sleep(0.5)
            measure("plain+stopped", prod_plain)
            plain_busy.stop()
    finally:
        for c in children:
            c.stop()
        try:
            subprocess.run([ctl], input="quit\n", env=mps_env, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            print("warning: MPS control daemon did not quit within 30 s", file=sys.stderr)
    configs = list(dict.fromkeys(r["config"] for r in rows))
    med = {c: statistics.median(r["its"] for r in rows if r["config"] == c) for c in configs}
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"prod": args.prod, "opp": args.opp, "window": args.window, "rows": rows}, f)
    print(f"\n| configuration ({args.prod}; neighbour {args.opp}) | it/s median [min-max] | ÷ plain |")
    print("|---|---|---|")
    for c in configs:
        v = [r["its"] for r in rows if r["config"] == c]
        print(f"| {c} | {med[c]:.1f} [{min(v):.1f}-{max(v):.1f}] | {med[c] / med['plain']:.3f} |")


if __name__ == "__main__":
    main()
