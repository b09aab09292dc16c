"""S3 (N equal inference clients, the nos "pods" comparison) and S6 (one job with and without
the shim). S4 is in scenario_memory.py.
"""

import glob
import json
import os

from experiment import Unit, spread, throughput
from gpushare_hook import Gpushare
from harness import Placement, WorkerSpec

S3_NOT_APPLICABLE = {
    "sequential": "not meaningful: clients one after another each see the isolated latency (the N=1 row)",
    "ticktock": "not applicable: TickTock alternates forward/backward phases of training jobs",
    "mps-thr30": "not applicable: equal clients have no production/opportunistic split to limit",
    "mps-prio": "not applicable: equal clients have no production/opportunistic split to prioritise",
}


def run_s3(exp):
    args, pool, W = exp.args, exp.pool, exp.args.window
    workload = args.prod or "resnet50_infer_b8"
    counts = sorted(args.clients)
    top = max(counts)
    specs = [WorkerSpec(f"plain-c{i}", ((workload, 0),)) for i in range(top)]
    specs += [WorkerSpec(f"mps-c{i}", ((workload, 0),), mps=True) for i in range(top)]
    specs.append(WorkerSpec("threads", tuple((workload, 0) for _ in range(top))))
    # gpushare rows: every client an opportunistic job under the shim (equal clients: no production),
    # on the policy's daemon; "@mps..." also makes them clients of the harness's MPS daemon.
    gs = Gpushare(args.shim, args.gpushare_daemon, args.gpushare_policy, pool.root,
                  log_level=getattr(args, "gpushare_log_level", "info"))
    exp.gpushare = gs
    gs.start_daemons(pool.log_dir)
    gs_rows = [b for b in gs.baselines() if gs.available(b)]
    for b in gs_rows:
        spec = gs.worker_specs(b, workload, workload)[1]
        specs += [WorkerSpec(f"{b}-c{i}", spec.jobs, spec.env, mps=spec.mps) for i in range(top)]
    pool.start(specs)
    task = {"mode": "closed", "start": 0.0, "end": W}

    def processes(prefix, n):
        return lambda rep: [Placement(pool.get(f"{prefix}-c{i}"), [dict(task, job=0)], tags=[f"c{i}"])
                            for i in range(n)]

    def threads(n):
        return lambda rep: [Placement(pool.get("threads"), [dict(task, job=i) for i in range(n)],
                                      tags=[f"c{i}" for i in range(n)])]

    units = []
    for n in counts:
        units += [Unit(f"time-slicing/N={n}", processes("plain", n), W),
                  Unit(f"mps/N={n}", processes("mps", n), W),
                  Unit(f"streams/N={n}", threads(n), W)]
        units += [Unit(f"{b}/N={n}", processes(b, n), W) for b in gs_rows]
    got = {}
    exp.run_reps(units, args.reps, lambda u, r, res: got.__setitem__((u.name, r), res))
    rows = []
    for base in ("time-slicing", "mps", "streams", *gs_rows):
        for n in counts:
            name = f"{base}/N={n}"
            per_inf, total = [], []
            for r in range(args.reps):
                if (name, r) not in got:
                    continue
                lat = [x for res in got[(name, r)].values() for x in res["latencies"]]
                if lat:
                    per_inf.append(sum(lat) / len(lat))
                total.append(sum(throughput(res, W, W) for res in got[(name, r)].values()))
            if not total:
                rows.append({"config": name, "baseline": base, "clients": n, "status": "failed",
                             "reason": exp.why_missing(name)})
                continue
            rows.append({"config": name, "baseline": base, "clients": n, "status": "ok", "reps": len(total),
                         "s_per_inference": spread(per_inf), "total_rps": spread(total)})
    for base, why in S3_NOT_APPLICABLE.items():
        rows.append({"config": base, "baseline": base, "status": "not run", "reason": why})
    for b in gs.baselines():
        if b not in gs_rows:
            rows.append({"config": b, "baseline": b, "status": "not run", "reason": gs.reason(b)})
    return {"workloads": {"client": workload}, "clients": counts, "rows": rows}


S6_DEFAULT = ("resnet50_train_b32", "mobilenet_v2_train_b64", "transformer_train_b32",
              "resnet50_train_b8", "resnet50_infer_b8")


def run_s6(exp):
    args, pool, W = exp.args, exp.pool, exp.args.window
    names = args.workloads or list(S6_DEFAULT)
    shim = os.path.abspath(args.shim) if args.shim else None
    have_shim = bool(shim and os.path.exists(shim))
    reports = os.path.join(os.path.abspath(exp.pool.log_dir), "shim-reports")
    os.makedirs(reports, exist_ok=True)
    specs = []
    for i, w in enumerate(names):
        specs.append(WorkerSpec(f"plain-{i}", ((w, 0),)))
        if have_shim:
            # No daemon: the shim runs pass-through (fail-open) and still counts every call,
            # which is the overhead every job pays before any policy acts.
            env = (("LD_PRELOAD", shim), ("GPUSHARE_REPORT", os.path.join(reports, f"{i}-%p.json")),
                   ("GPUSHARE_SOCKET", os.path.join(pool.root, "no-daemon.sock")), ("GPUSHARE_QUIET", "1"))
            specs.append(WorkerSpec(f"shim-{i}", ((w, 0),), env))
    pool.start(specs)
    task = {"mode": "closed", "start": 0.0, "end": W}
    units = []
    for i, w in enumerate(names):
        units.append(Unit(f"plain/{w}", lambda rep, i=i: [Placement(pool.get(f"plain-{i}"), [dict(task, job=0)], tags=["job"])], W))
        if have_shim:
            units.append(Unit(f"shim/{w}", lambda rep, i=i: [Placement(pool.get(f"shim-{i}"), [dict(task, job=0)], tags=["job"])], W))
    got = {}
    exp.run_reps(units, args.reps, lambda u, r, res: got.__setitem__((u.name, r), throughput(res["job"], W, W)))
    preloaded = {label: w.info.get("preloaded") for label, w in pool.workers.items() if label.startswith("shim-")}
    exp.close()  # the shim writes its report when the worker exits
    rows = []
    for i, w in enumerate(names):
        plain = [got.get((f"plain/{w}", r)) for r in range(args.reps)]
        row = {"config": w, "plain_its": spread(plain), "status": "ok" if any(plain) else "failed"}
        if not have_shim:
            row.update(status="not run", reason=f"shim not available: {shim} does not exist")
        else:
            withs = [got.get((f"shim/{w}", r)) for r in range(args.reps)]
            row["shim_its"] = spread(withs)
            # Paired per repetition: both ran in the same repetition, close in time.
            row["overhead_pct"] = spread([(1 - s / p) * 100 for p, s in zip(plain, withs) if p and s])
            row["preloaded"] = preloaded.get(f"shim-{i}")
            row["shim_report"] = _shim_report(reports, i)
            if row["overhead_pct"] is None:
                row.update(status="failed", reason=exp.why_missing(f"shim/{w}"))
        rows.append(row)
    return {"workloads": {"jobs": names}, "shim": shim, "rows": rows}


def _shim_report(report_dir, index):
    """The launches the shim counted in that worker: proof that it intercepted the work."""
    for path in glob.glob(os.path.join(report_dir, f"{index}-*.json")):
        try:
            with open(path) as f:
                rep = json.load(f)
            return {"launches": rep.get("launches", {}).get("total"),
                    "unmatched": rep.get("interception", {}).get("proc_address_unmatched")}
        except (OSError, ValueError):
            continue
    return None
