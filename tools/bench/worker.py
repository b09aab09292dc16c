"""One benchmark process: hosts one or more jobs and runs them when the controller says so.

Started by the controller (harness.py) with the environment of its baseline (MPS pipe directory,
thread percentage, client priority, LD_PRELOAD of the shim...). It builds its jobs, warms each
up, and then answers JSON lines on stdin:

  {"cmd": "prepare", "jobs": [0], "warmup": 3}   -> {"event": "prepared"}
  {"cmd": "run", "scheme": "threads" | "ticktock", "tasks": [task, ...]}
                                                  -> {"event": "done", "results": [...]}
  {"cmd": "quit"}                                 -> exits normally (so the shim writes its report)

A task names a job and absolute wall-clock start/end times (the barrier: every process of a
window starts at the same instant), and a mode:
  closed   run iterations back to back;
  poisson  serve requests arriving as a Poisson process of `rate` per second, one at a time,
           latency measured from the scheduled arrival (an open loop: a late server does not
           slow down the arrivals);
  onoff    closed loop during the first `on_s` of every `on_s + off_s` period, idle otherwise.
Results carry completion times (and latencies) relative to the task's start.

The protocol uses a private copy of stdout; fd 1 is pointed at stderr so that a library's
print can never corrupt it.
"""

import argparse
import json
import os
import random
import sys
import threading
import time
import traceback
from collections import deque

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

_proto = None  # the protocol stream (a dup of the original stdout)


_seq = None  # the sequence number of the command being answered


def reply(obj):
    obj = dict(obj, seq=_seq)
    _proto.write(json.dumps(obj) + "\n")
    _proto.flush()


def sleep_until(t):
    while True:
        left = t - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


def _wait(ev):
    if ev is not None:
        ev.synchronize()


def closed_loop(job, start, end, on_s=None, off_s=None):
    """Back-to-back iterations with at most `in_flight_depth` queued; on/off when asked."""
    spec = job.spec
    depth = spec.in_flight_depth
    pause = spec.pause_ms / 1000.0
    completions, latencies, pending = [], [], deque()
    sleep_until(start)
    while True:
        now = time.time()
        if now >= end:
            break
        if on_s is not None:
            phase = (now - start) % (on_s + off_s)
            if phase >= on_s:  # off: let the GPU go, wait for the next on-edge
                while pending:
                    launched, ev = pending.popleft()
                    _wait(ev)
                    completions.append(time.time() - start)
                    latencies.append(time.time() - launched)
                sleep_until(min(end, now + (on_s + off_s - phase)))
                continue
        launched = time.time()
        job.step()
        pending.append((launched, job.record()))
        if len(pending) >= depth:
            launched, ev = pending.popleft()
            _wait(ev)
            done = time.time()
            completions.append(done - start)
            latencies.append(done - launched)
        if pause > 0:
            time.sleep(pause)
    while pending:
        launched, ev = pending.popleft()
        _wait(ev)
        done = time.time()
        completions.append(done - start)
        latencies.append(done - launched)
    return {"completions": completions, "latencies": latencies}


def poisson_loop(job, start, end, rate, seed, drain_s):
    """Open-loop service: arrivals are fixed in advance; latency = completion - scheduled arrival."""
    rng = random.Random(seed)
    arrivals, t = [], start
    while True:
        t += rng.expovariate(rate)
        if t >= end:
            break
        arrivals.append(t)
    completions, latencies, unserved = [], [], 0
    for i, arrival in enumerate(arrivals):
        now = time.time()
        if arrival > now:
            time.sleep(arrival - now)
        elif now > end + drain_s:  # hopelessly behind: count the rest as unserved
            unserved = len(arrivals) - i
            break
        job.step()
        _wait(job.record())
        done = time.time()
        completions.append(done - start)
        latencies.append(done - arrival)
    return {"completions": completions, "latencies": latencies, "arrivals": len(arrivals), "unserved": unserved}


def run_task(job, task):
    mode = task["mode"]
    if mode == "closed":
        return closed_loop(job, task["start"], task["end"])
    if mode == "onoff":
        return closed_loop(job, task["start"], task["end"], task["on_s"], task["off_s"])
    if mode == "poisson":
        return poisson_loop(job, task["start"], task["end"], task["rate"], task.get("seed", 0),
                            task.get("drain_s", 2.0))
    raise ValueError(f"unknown mode {mode!r}")


def ticktock(job_a, job_b, task_a, task_b):
    """Wavelet's tick-tock: A's forward overlaps B's backward and the other way round.

    Phases are separated by a barrier; the barrier's action decides, once for both threads,
    whether the window is over, so they always stop at the same phase.
    """
    start, end = task_a["start"], task_a["end"]
    stop = [False]
    barrier = threading.Barrier(2, action=lambda: stop.__setitem__(0, time.time() >= end))
    results = [None, None]

    def side(idx, job, offset):
        completions = []
        sleep_until(start)
        phase = 0
        while True:
            k = phase - offset
            if k >= 0:
                if k % 2 == 0:
                    job.forward()
                else:
                    job.backward()
                job.wait_idle()
                if k % 2 == 1:
                    completions.append(time.time() - start)
            barrier.wait()
            if stop[0]:
                break
            phase += 1
        results[idx] = {"completions": completions, "latencies": []}

    threads = [threading.Thread(target=side, args=(0, job_a, 0)),
               threading.Thread(target=side, args=(1, job_b, 1))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results


def run_threads(jobs, tasks):
    """Each task on its own thread (and its job's own stream), all at once."""
    results = [None] * len(tasks)
    errors = []

    def body(i, task):
        try:
            results[i] = run_task(jobs[task["job"]], task)
        except Exception:  # reported to the controller, which marks the row
            errors.append(traceback.format_exc())

    if len(tasks) == 1:
        body(0, tasks[0])
    else:
        threads = [threading.Thread(target=body, args=(i, t)) for i, t in enumerate(tasks)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    if errors:
        raise RuntimeError(errors[0])
    return results


def describe(jobs):
    info = {"pid": os.getpid(),
            "preloaded": [],
            "env": {k: v for k, v in os.environ.items()
                    if k.startswith(("CUDA_MPS_", "GPUSHARE_")) or k == "LD_PRELOAD"}}
    try:
        with open("/proc/self/maps") as maps:
            info["preloaded"] = sorted({line.split()[-1] for line in maps if "libgpushare" in line})
    except OSError:
        pass
    if any(j.stream is not None for j in jobs):
        import torch

        info.update(torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                    device=torch.cuda.get_device_name(), reserved_bytes=torch.cuda.memory_reserved())
    return info


def main():
    global _proto, _seq
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", action="append", required=True, help="WORKLOAD[:stream priority]")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    _proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        jobs = []
        for i, arg in enumerate(args.job):
            name, _, prio = arg.partition(":")
            jobs.append(workloads.Job(workloads.parse(name), int(prio or 0), seed=args.seed + i))
        for job in jobs:
            for _ in range(args.warmup):
                job.step()
            job.wait_idle()
        reply({"event": "ready", "info": describe(jobs)})
    except Exception:
        reply({"event": "failed", "error": traceback.format_exc(limit=3)})
        return 1

    for line in sys.stdin:
        msg = json.loads(line)
        _seq = msg.get("seq")
        try:
            if msg["cmd"] == "quit":
                break
            if msg["cmd"] == "prepare":
                for i in msg["jobs"]:
                    for _ in range(msg.get("warmup", 3)):
                        jobs[i].step()
                    jobs[i].wait_idle()
                reply({"event": "prepared"})
            elif msg["cmd"] == "run":
                tasks = msg["tasks"]
                if msg.get("scheme") == "ticktock":
                    results = ticktock(jobs[tasks[0]["job"]], jobs[tasks[1]["job"]], tasks[0], tasks[1])
                else:
                    results = run_threads(jobs, tasks)
                reply({"event": "done", "results": results})
            else:
                raise ValueError(f"unknown command {msg['cmd']!r}")
        except Exception:
            reply({"event": "error", "error": traceback.format_exc(limit=4)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
