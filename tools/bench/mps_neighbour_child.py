"""One process of mps_neighbour.py, in its own interpreter (each substrate is chosen by the
environment before CUDA starts): `python3 mps_neighbour_child.py MODE WORKLOAD`.

  serve  builds the workload, says "ready", then for each "run SECONDS" line on stdin runs a closed
         loop (two iterations in flight, as the harness's training workers) and answers its
         iterations per second;
  loop   the same loop until killed (the busy neighbour);
  idle   holds a CUDA context and sleeps (the idle neighbour).
"""
import sys
import time

import workloads


def closed_loop(job, seconds):
    events, done, start = [], 0, time.time()
    while time.time() - start < seconds:
        job.step()
        events.append(job.record())
        if len(events) > 2:
            event = events.pop(0)
            done += 1
            if event is not None:  # None: the `sleep` workload (a dry run without a GPU)
                event.synchronize()
    job.wait_idle()
    return (done + len(events)) / (time.time() - start)


def main(mode, name):
    if mode == "idle":
        import torch
        torch.zeros(1 << 20, device="cuda")
        torch.cuda.synchronize()
        print("ready", flush=True)
        while True:
            time.sleep(1)
    job = workloads.Job(workloads.parse(name))
    for _ in range(5):
        job.step()
    job.wait_idle()
    print("ready", flush=True)
    if mode == "loop":
        while True:
            closed_loop(job, 3600)
    for line in sys.stdin:
        print(f"{closed_loop(job, float(line.split()[1])):.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
