"""S7: more opportunistic memory than the device holds — rotating residency on a real GPU.

Three deterministic training runs (tools/bench/train_steps.py) whose working sets together are about
twice what a configured capacity leaves after a production job (16 GiB by default, far below the
card's, so that nothing ever asks the hardware for more memory than it has free), beside that
production job, which trains for as long as any of them does, resting `--prod-sleep-ms` on the CPU
after each step (so that it leaves the GPU part of the time: beside a saturating production job the
installed default holds the opportunistic jobs to a few per cent, and the rows would measure the
compute policy rather than the rotation):

- isolated-*: each job alone, no shim: its reference step time, wall time, peak memory and weights;
- no-gpushare: all four at once, the capacity split equally (PyTorch's per-process fraction): what a
  user gets without a broker (out of memory);
- gpushare (no rotation): gpushared with `memory.capacity` and `oversubscribe`, rotation off: the
  jobs that do not fit wait on host until room returns;
- rotation rows (`memory.rotation`): FIFO without prefetch, FIFO with prefetch, the thesis's weight
  order with prefetch, and the order the simulator's search finds on the trace the weight row recorded
  (`gpushare-sim memory --trace`: the search's step order, each job named at its first appearance,
  given to the daemon as `order: fixed`).

Every gpushare row runs the compute policy of the installed default config, so production keeps its
speed beside whichever job computes. Per row: makespan (first opportunistic start to last step),
each job's NT (isolated time / its time here, both from its process's start to its last step,
so a wait for memory before its first step counts), production's steady NT (median step times), bytes
moved and the copy time spent in prefetches (hidden under another job's compute) and in switches
(the daemon's acknowledgement lines), and whether every opportunistic job's weights equal its
isolated run's. Production's memory never moves; it runs until the last job ends, so its step count
varies and its weights are not compared.
"""

import json
import os
import re
import statistics
import subprocess
import time

from gpushare_hook import start_daemon, stop_daemon
from scenario_memory import TrainJob, gib, outcome_text, parse_gib, step_times

PROD_SEED = 1
# The installed default's compute policy (deploy/gpushared.json).
DEFAULT_POLICY = {"default": "harvest",
                  "parameters": {"harvest": {"target": 0.95, "kernel_gating": 1, "in_flight": 4, "concurrency": 2}}}
ACK = re.compile(r"\b(swapped-out|swapped-in|prefetched) pid=\d+ job=(\S+) id=\d+ bytes=(\d+) in ([0-9.]+) ms")
SEARCH_ROW = re.compile(r"^\s*search from weight\s+(?:[0-9.]+\s+){4}\d+\s+(.+)$")


def parse_jobs(text):
    """'resnet50:96:120,resnet50:64:160' -> [(model, batch, steps), ...]."""
    jobs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        fields = part.split(":")
        if len(fields) != 3 or not fields[1].isdigit() or not fields[2].isdigit():
            raise ValueError(f"expected MODEL:BATCH:STEPS, got {part!r}")
        jobs.append((fields[0], int(fields[1]), int(fields[2])))
    if not jobs:
        raise ValueError("no jobs given")
    return jobs


def copy_summary(log_text):
    """The shims' swap acknowledgements in a daemon log: bytes and milliseconds per kind."""
    out = {k: {"bytes": 0, "ms": 0.0, "count": 0} for k in ("swapped-out", "swapped-in", "prefetched")}
    for m in ACK.finditer(log_text):
        k = out[m.group(1)]
        k["bytes"] += int(m.group(3))
        k["ms"] += float(m.group(4))
        k["count"] += 1
    return out


def search_order(sim_output):
    """The job order of `gpushare-sim memory`'s 'search from weight' row: each job at its first
    step in the searched schedule (the daemon's rotation takes a cycle of jobs, not a step order)."""
    for line in sim_output.splitlines():
        m = SEARCH_ROW.match(line)
        if m:
            order = []
            for name in m.group(1).split():
                name = name.split("#")[0]
                if name not in order:
                    order.append(name)
            return order
    return None


def rotation_verdict(iso, got, started, last_step, prod, iso_prod):
    """Makespan, each job's NT and weights, and production's steady NT for one shared row."""
    r = {}
    opp = [k for k in got if k != "prod"]
    ends = [last_step[k] for k in opp if last_step.get(k)]
    if len(ends) == len(opp) and all(got[k].get("outcome") == "completed" for k in opp):
        r["makespan_s"] = round(max(ends) - min(started[k] for k in opp), 1)
    for k in opp:
        res, ref = got[k], iso.get(k) or {}
        if res.get("outcome") == "completed" and ref.get("outcome") == "completed":
            r[f"{k}_weights_equal"] = res.get("weights_sha256") == ref.get("weights_sha256")
            if ref.get("elapsed_s") and res.get("elapsed_s"):
                r[f"{k}_nt_wall"] = round(ref["elapsed_s"] / res["elapsed_s"], 3)
    if prod and prod.get("outcome") == "completed" and iso_prod and iso_prod.get("outcome") == "completed":
        a, b = step_times(iso_prod), step_times(prod)
        if a and b:
            r["prod_nt_steady"] = round(statistics.median(a) / statistics.median(b), 3)
            r["prod_p90_step_ratio"] = round(sorted(b)[int(0.9 * (len(b) - 1))] / statistics.median(a), 3)
    return r


def run_s7(exp):
    args, pool = exp.args, exp.pool
    capacity = parse_gib(args.capacity)
    jobs = parse_jobs(args.rotation_jobs)
    p_model, p_batch, p_steps = parse_jobs(args.rotation_prod)[0]
    names = [chr(ord("A") + i) for i in range(len(jobs))]
    log_dir = pool.log_dir
    base_env = dict(os.environ, PYTHONUNBUFFERED="1", CUDA_MPS_PIPE_DIRECTORY=pool.no_mps_dir)
    base_env.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # expandable segments are VMM: not swappable
    t_end = time.time() + args.budget_s
    rows, iso = [], {}

    def spec(k):
        i = names.index(k)
        return {"model": jobs[i][0], "batch": jobs[i][1], "steps": jobs[i][2], "seed": 10 + i}

    def emit(r):
        rows.append(r)
        cells = [r["config"], r.get("makespan_s", "–"), " ".join(f"{k} {r.get(f'{k}_nt_wall', '–')}" for k in names),
                 r.get("prod_nt_steady", "–"), r.get("weights", "–"), r.get("moved_gb", "–"),
                 r.get("prefetch_s", "–"), r.get("switch_s", "–"), r.get("note", r.get("reason", ""))]
        print("| S7 | " + " | ".join(str(c) for c in cells) + " |", flush=True)

    # Isolated runs: the references. Production runs its own step count here.
    for k in ["prod"] + names:
        if time.time() > t_end:
            break
        if k == "prod":
            job = TrainJob("isolated-prod", args, base_env, log_dir, PROD_SEED, steps=p_steps, batch=p_batch,
                           model=p_model, prefix="s7", step_sleep_ms=args.prod_sleep_ms)
        else:
            s = spec(k)
            job = TrainJob(f"isolated-{k}", args, base_env, log_dir, s["seed"], steps=s["steps"], batch=s["batch"],
                           model=s["model"], prefix="s7")
        iso[k] = job.finish(max(60.0, t_end - time.time()))
        iso[k]["elapsed_s"] = job.elapsed_s()
        emit({"config": f"isolated-{k}", "status": "ok" if iso[k].get("outcome") == "completed" else "failed",
              "note": f"{outcome_text(iso[k])}, {iso[k].get('elapsed_s')} s from start to last step, peak reserved "
                      f"{gib(iso[k].get('max_memory_reserved'))} GiB"})
    demand = sum(iso[k].get("max_memory_reserved") or 0 for k in iso) / 2**30
    rotating = sum(iso[k].get("max_memory_reserved") or 0 for k in names if k in iso) / 2**30

    def shared(label, env_of, cap_gib=None):
        """Production first; the others once it trains, one second apart (their registration order)."""
        stop = os.path.join(pool.root, f"s7-{label}.stop")
        if os.path.exists(stop):
            os.unlink(stop)
        prod = TrainJob(f"{label}-prod", args, env_of("production", "prod"), log_dir, PROD_SEED, cap_gib,
                        steps=1_000_000, batch=p_batch, model=p_model, stop_file=stop, prefix="s7",
                        step_sleep_ms=args.prod_sleep_ms)
        prod.wait_for_step(5, 120)
        running, started = {}, {}
        for k in names:
            s = spec(k)
            running[k] = TrainJob(f"{label}-{k}", args, env_of("opportunistic", k), log_dir, s["seed"], cap_gib,
                                  steps=s["steps"], batch=s["batch"], model=s["model"], prefix="s7")
            started[k] = running[k].started
            time.sleep(1.0)
        got = {k: running[k].finish(max(30.0, t_end - time.time())) for k in names}
        for k in names:
            got[k]["elapsed_s"] = running[k].elapsed_s()
        open(stop, "w").close()
        got["prod"] = prod.finish(60)
        last = {k: running[k].last_step_wall for k in names}
        return got, started, last

    if "no-gpushare" not in args.skip and time.time() < t_end:
        share = capacity / (len(names) + 1)
        got, started, last = shared("no-gpushare", lambda cls, k: base_env, cap_gib=share)
        r = {"config": "no-gpushare", "status": "ok",
             **rotation_verdict(iso, got, started, last, got["prod"], iso.get("prod"))}
        r["note"] = "; ".join(f"{k}: {outcome_text(got[k])}" for k in ["prod"] + names) + \
            f" (capacity split {share:.1f} GiB each)"
        emit(r)

    shim = os.path.abspath(args.shim) if args.shim else None
    configs = [("gpushare", {"enabled": False}),
               ("rotation-fifo-no-prefetch", {"enabled": True, "order": "fifo", "prefetch": False}),
               ("rotation-fifo", {"enabled": True, "order": "fifo", "prefetch": True}),
               ("rotation-weight", {"enabled": True, "order": "weight", "prefetch": True}),
               ("rotation-search", None)]
    trace = os.path.join(log_dir, "s7-weight-trace.jsonl")
    for label, rotation in configs:
        if label in args.skip:
            continue
        if time.time() > t_end - 30:
            emit({"config": label, "status": "not run", "reason": "the time budget (--budget-s) is spent"})
            continue
        if not args.gpushare_daemon or not shim or not os.path.exists(shim):
            emit({"config": label, "status": "not run", "reason": "needs --gpushare-daemon and --shim"})
            continue
        how = ""
        if rotation is None:  # the search's order, from the weight row's recording
            sim = args.gpushare_sim
            if not sim or not os.path.exists(trace):
                emit({"config": label, "status": "not run",
                      "reason": "needs --gpushare-sim and the weight row's trace"})
                continue
            p = subprocess.run(f"{sim} memory --trace {trace}", shell=True, capture_output=True, text=True, timeout=60)
            with open(os.path.join(log_dir, "s7-sim-replay.txt"), "w") as f:
                f.write(p.stdout + p.stderr)
            order = search_order(p.stdout)
            if p.returncode != 0 or not order:
                emit({"config": label, "status": "not run",
                      "reason": f"gpushare-sim memory --trace failed: {(p.stderr or p.stdout).strip()[:160]}"})
                continue
            rotation = {"enabled": True, "order": "fixed", "fixed_order": order, "prefetch": True}
            how = f"order {','.join(order)} from the search on the weight row's trace"
        if rotation.get("enabled"):
            rotation["min_turn_ms"] = args.min_turn_ms
        sock = os.path.join(pool.root, f"s7-{label}.sock")
        memory = {"capacity": f"{capacity:g}G", "oversubscribe": True, "rotation": rotation}
        if label == "rotation-weight":
            memory["trace"] = trace
        config = {"socket": {"path": sock}, "production": [{"uid": os.getuid()}], "policy": DEFAULT_POLICY,
                  "tick_ms": 50, "log_level": "info", "memory": memory}
        daemon_log = os.path.join(log_dir, f"gpushared-s7-{label}.log")
        proc, error = start_daemon(args.gpushare_daemon, config, os.path.join(log_dir, f"gpushared-s7-{label}.json"),
                                   daemon_log)
        if error:
            emit({"config": label, "status": "not run", "reason": error})
            stop_daemon(proc)
            continue

        def env(cls, k):
            return dict(base_env, LD_PRELOAD=shim, GPUSHARE_SOCKET=sock, GPUSHARE_PRIORITY=cls, GPUSHARE_JOB=k,
                        GPUSHARE_REQUIRE_DAEMON="1")

        try:
            got, started, last = shared(label, env)
        finally:
            stop_daemon(proc)
        with open(daemon_log, errors="replace") as f:
            copies = copy_summary(f.read())
        r = {"config": label, "status": "ok", "how": how, "copies": copies,
             **rotation_verdict(iso, got, started, last, got["prod"], iso.get("prod"))}
        eq = [r.get(f"{k}_weights_equal") for k in names]
        r["weights"] = "all equal" if all(eq) else ", ".join(
            f"{k} {'equal' if e else 'DIFFER' if e is False else 'n/a'}" for k, e in zip(names, eq))
        r["moved_gb"] = round(sum(c["bytes"] for c in copies.values()) / 1e9, 1)
        r["prefetch_s"] = round(copies["prefetched"]["ms"] / 1e3, 1)
        r["switch_s"] = round((copies["swapped-out"]["ms"] + copies["swapped-in"]["ms"]) / 1e3, 1)
        bad = [f"{k}: {outcome_text(got[k])}" for k in ["prod"] + names if got[k].get("outcome") != "completed"]
        r["note"] = "; ".join(filter(None, [how] + bad))
        if bad:
            r["status"] = "failed"
        emit(r)

    return {"workloads": {"production": f"{p_model} b{p_batch}, {args.prod_sleep_ms:g} ms of CPU after each step "
                                        "(runs until the last job ends)",
                          **{k: "{model} b{batch} x {steps} steps (seed {seed})".format(**spec(k)) for k in names}},
            "capacity_gib": capacity, "demand_gib": round(demand, 2), "rotating_gib": round(rotating, 2),
            "min_turn_ms": args.min_turn_ms, "names": names, "rows": rows,
            "isolated": {k: {kk: vv for kk, vv in v.items() if kk != "step_end_s"} for k, v in iso.items()}}
