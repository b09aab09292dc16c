"""The sharing baselines, as the processes they need and the way their jobs are placed.

Two jobs share the GPU: `production` (P) and `opportunistic` (O). Each baseline says which worker
processes carry them (and with which environment), and how a window's tasks are laid out:

  isolated      each job alone (two rows: P alone, O alone); NT's denominator
  sequential    P for the first half of the window, then O for the second half
  time-slicing  two plain processes at once: the driver's time slices, no kernel overlap
  streams       one process, two threads; P on a high-priority stream, O on a normal one
  ticktock      one process, two threads alternating forward and backward phases (Wavelet,
                MLSys'21): P's forward overlaps O's backward and the other way round
  mps           two clients of the harness's own MPS daemon
  mps-thrN      MPS, O started with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=N (P keeps 100)
  mps-prio      MPS, O started with CUDA_MPS_CLIENT_PRIORITY=1 (below normal)
  gpushare:POL  both jobs under LD_PRELOAD=libgpushare.so, the daemon running policy POL
"""

import harness
from harness import Placement, WorkerSpec

MPS_THREAD_LIMITS = (30, 20, 10)
ALL = ("isolated", "sequential", "time-slicing", "streams", "ticktock", "mps",
       "mps-thr30", "mps-thr20", "mps-thr10", "mps-prio")

# Stream priorities in PyTorch: lower is more urgent; -1 is "high" on every recent GPU.
HIGH_PRIORITY = -1


# Every worker process lives for the whole run, its CUDA context and model on the GPU: a resnet50
# b32 training worker holds up to 4.25 GiB, and on the 80 GB H100 a run with 23 workers ran out of
# device memory at start-up while one with 15 did not (docs/benchmarks.md §4c).
MAX_WORKERS_WITHOUT_WARNING = 15


def worker_count_warning(specs):
    """A warning for a run that starts more workers than have been seen to fit, else None."""
    if len(specs) <= MAX_WORKERS_WITHOUT_WARNING:
        return None
    return (f"{len(specs)} worker processes, each holding its model on the GPU for the whole run: "
            f"more than {MAX_WORKERS_WITHOUT_WARNING} (23 resnet50 b32 workers ran out of memory on "
            f"an 80 GB H100); split the configurations over several runs if rows fail with OOM")


def worker_specs(prod, opp, baselines, gpushare=None):
    """Every worker process the listed baselines need (started once, reused by every window)."""
    specs = [WorkerSpec("plain-prod", ((prod, 0),)), WorkerSpec("plain-opp", ((opp, 0),))]
    if {"streams", "ticktock"} & set(baselines):
        specs.append(WorkerSpec("pair", ((prod, HIGH_PRIORITY), (opp, 0))))
    if any(b.startswith("mps") for b in baselines):
        specs += [WorkerSpec("mps-prod", ((prod, 0),), mps=True), WorkerSpec("mps-opp", ((opp, 0),), mps=True)]
    for b in baselines:
        if b.startswith("mps-thr"):
            pct = b[len("mps-thr"):]
            specs.append(WorkerSpec(f"mps-opp-thr{pct}", ((opp, 0),), (("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", pct),),
                                    mps=True))
        elif b == "mps-prio":
            specs.append(WorkerSpec("mps-opp-prio", ((opp, 0),), (("CUDA_MPS_CLIENT_PRIORITY", "1"),), mps=True))
        elif b.startswith("gpushare:") and gpushare and gpushare.available(b):
            specs += gpushare.worker_specs(b, prod, opp)
    return specs


def placements(pool, baseline, prod_task, opp_task, gpushare=None):
    """The placements of one shared window; tasks are dicts without the "job" key."""
    p = dict(prod_task, job=0)
    o = dict(opp_task, job=0)
    if baseline == "sequential":
        half = p["end"] / 2.0
        return [Placement(pool.get("plain-prod"), [dict(p, end=half)], tags=["prod"]),
                Placement(pool.get("plain-opp"), [dict(o, start=half)], tags=["opp"])]
    if baseline == "time-slicing":
        return [Placement(pool.get("plain-prod"), [p], tags=["prod"]),
                Placement(pool.get("plain-opp"), [o], tags=["opp"])]
    if baseline in ("streams", "ticktock"):
        return [Placement(pool.get("pair"), [p, dict(o, job=1)],
                          scheme="ticktock" if baseline == "ticktock" else "threads", tags=["prod", "opp"])]
    if baseline == "mps":
        return [Placement(pool.get("mps-prod"), [p], tags=["prod"]),
                Placement(pool.get("mps-opp"), [o], tags=["opp"])]
    if baseline.startswith("mps-thr"):
        return [Placement(pool.get("mps-prod"), [p], tags=["prod"]),
                Placement(pool.get(f"mps-opp-thr{baseline[len('mps-thr'):]}"), [o], tags=["opp"])]
    if baseline == "mps-prio":
        return [Placement(pool.get("mps-prod"), [p], tags=["prod"]),
                Placement(pool.get("mps-opp-prio"), [o], tags=["opp"])]
    if baseline.startswith("gpushare:") and gpushare:
        return gpushare.placements(pool, baseline, p, o)
    raise harness.WorkerError(f"unknown baseline {baseline}")


def isolated(pool, role, task):
    label = "plain-prod" if role == "prod" else "plain-opp"
    return [Placement(pool.get(label), [dict(task, job=0)], tags=[role])]
