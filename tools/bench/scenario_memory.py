"""S4: memory oversubscription against a configured capacity.

Two deterministic training runs (tools/bench/train_steps.py, resnet50 at a batch that holds about
10 GiB each) whose working sets together exceed the capacity (16 GiB by default, far below the
card's, so that nothing ever asks the hardware for more than it has free):

- isolated-prod, isolated-opp: each alone, no shim: the reference rates and weights;
- time-slicing: both at once, the capacity split statically (PyTorch's per-process fraction);
- mps: both MPS clients, the capacity split through CUDA_MPS_PINNED_DEVICE_MEM_LIMIT;
- gpushare: both under the shim, gpushared with `memory.capacity` and without `oversubscribe`
  (admission only), then with it (opportunistic memory becomes managed and moves to host).

In the shared rows the opportunistic job starts first and holds its working set, and production
starts after it: production needs memory the opportunistic job holds. Every job runs to its end or
to its error; the row says which. "Nothing lost": each job's weight digest is compared with its
isolated run's (same seed, deterministic algorithms).
"""

import json
import os
import statistics
import subprocess
import sys
import threading
import time

from gpushare_hook import start_daemon, stop_daemon

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 2**30
PROD_SEED, OPP_SEED = 1, 2


def parse_gib(text):
    """'16G', '16GiB' or '16' (GiB) -> GiB as a float."""
    t = str(text).strip().upper().removesuffix("IB").removesuffix("B").removesuffix("G")
    value = float(t)
    if value <= 0:
        raise ValueError(f"capacity must be positive, got {text!r}")
    return value


class TrainJob:
    """One train_steps.py process; remembers when each of its output lines arrived."""

    def __init__(self, label, args, env, log_dir, seed, cap_gib=None, steps=None, batch=None, model=None,
                 stop_file=None, prefix="s4", step_sleep_ms=0):
        self.label, self.prefix = label, prefix
        self.out = os.path.join(log_dir, f"{prefix}-{label}.json")
        cmd = [sys.executable, os.path.join(HERE, "train_steps.py"), "--seed", str(seed),
               "--steps", str(steps or args.steps), "--batch", str(batch or args.batch), "--out", self.out]
        if model:
            cmd += ["--model", model]
        if cap_gib:
            cmd += ["--memory-cap-gib", str(cap_gib)]
        if stop_file:
            cmd += ["--stop-file", stop_file]
        if step_sleep_ms:
            cmd += ["--step-sleep-ms", str(step_sleep_ms)]
        self.steps_seen = -1
        self.first_step_wall = self.last_step_wall = None  # when its first and last step lines came
        self.started = time.time()
        self.log = open(os.path.join(log_dir, f"{prefix}-{label}.log"), "w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.log.write(line)
            if line.startswith("step "):
                self.steps_seen = int(line.split()[1])
                self.first_step_wall = self.first_step_wall or time.time()
                self.last_step_wall = time.time()

    def elapsed_s(self):
        """From the process's start to its last step line (None before a step)."""
        return round(self.last_step_wall - self.started, 3) if self.last_step_wall else None

    def wait_for_step(self, step, timeout_s):
        deadline = time.time() + timeout_s
        while self.steps_seen < step and self.proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)

    def finish(self, timeout_s):
        try:
            self.proc.wait(timeout=max(1.0, timeout_s))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=5)
        self.log.close()
        try:
            with open(self.out) as f:
                return json.load(f)
        except (OSError, ValueError):
            timed_out = self.proc.returncode in (-9, 137)
            return {"outcome": "timeout" if timed_out else "crashed", "returncode": self.proc.returncode,
                    "error": f"no result file (exit status {self.proc.returncode}; see {self.prefix}-{self.label}.log)"}


def gib(n):
    return None if n is None else round(n / GIB, 2)


def outcome_text(res):
    if res.get("outcome") == "completed":
        return f"completed {len(res.get('step_end_s', []))} steps"
    if res.get("outcome") in ("oom", "error"):
        return f"{res['outcome']} at step {res.get('failed_step')}: {res.get('error', '')[:90]}"
    return f"{res.get('outcome')}: {res.get('error', '')}"


def step_times(res, skip=5):
    ends = res.get("step_end_s") or []
    return [b - a for a, b in zip(ends[skip:], ends[skip + 1:])]


def analyse(iso, shared):
    """Production NT (steady: median step time; wall: all steps, the wait for room included), the
    opportunistic job's longest pause, and whether each job's weights equal its isolated run's."""
    out = {}
    for cls in ("prod", "opp"):
        r, ref = shared.get(cls) or {}, iso.get(cls) or {}
        out[f"{cls}_outcome"] = outcome_text(r) if r else "not run"
        out[f"{cls}_peak_reserved_gib"] = gib(r.get("max_memory_reserved"))
        view = r.get("mem_get_info_at_start") or {}
        out[f"{cls}_view_total_gib"] = round(view.get("total", 0) / GIB, 2) if view else None
        if r.get("outcome") == "completed" and ref.get("outcome") == "completed":
            out[f"{cls}_weights_equal"] = r.get("weights_sha256") == ref.get("weights_sha256")
            a, b = step_times(ref), step_times(r)
            if a and b:
                out[f"{cls}_nt_steady"] = round(statistics.median(a) / statistics.median(b), 3)
            out[f"{cls}_nt_wall"] = round(ref["step_end_s"][-1] / r["step_end_s"][-1], 3)
            gaps = [y - x for x, y in zip(r["step_end_s"], r["step_end_s"][1:])]
            out[f"{cls}_longest_gap_s"] = round(max(gaps), 3) if gaps else None
    return out


class CtlPoller:
    """Samples `gpusharectl jobs --memory -o json` while a gpushare row runs: the swap timeline."""

    def __init__(self, ctl_cmd, sock, period_s=0.25):
        self.cmd, self.sock, self.period_s = ctl_cmd, sock, period_s
        self.samples, self.t0 = [], time.time()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self._stop.is_set():
            cmd = f"{self.cmd} --socket {self.sock} -o json jobs --memory"
            r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=10)
            if r.returncode == 0:
                try:
                    jobs = json.loads(r.stdout).get("jobs", [])
                except ValueError:
                    jobs = []
                self.samples.append({"t": round(time.time() - self.t0, 3), "jobs": [
                    {"pid": j.get("pid"), "class": j.get("class"), "bytes": j.get("memory_bytes"),
                     "state": (j.get("memory_state") or {}).get("state"),
                     "swappable": (j.get("memory_state") or {}).get("swappable_bytes"),
                     "swaps_out": (j.get("memory_state") or {}).get("swaps_out"),
                     "swaps_in": (j.get("memory_state") or {}).get("swaps_in")} for j in jobs]})
            self._stop.wait(self.period_s)

    def stop(self):
        self._stop.set()
        self.thread.join(timeout=15)
        return self.samples


def run_s4(exp):
    args, pool = exp.args, exp.pool
    capacity = parse_gib(args.capacity)
    log_dir = pool.log_dir
    base_env = dict(os.environ, PYTHONUNBUFFERED="1", CUDA_MPS_PIPE_DIRECTORY=pool.no_mps_dir)
    base_env.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # expandable segments are VMM: not swappable
    # The opportunistic job must still be training when production arrives and while it runs, so
    # that it is paused, swapped out and back, and resumes: it runs longer than production.
    opp_steps = args.opp_steps or 3 * args.steps
    timeout = max(60.0, (args.steps + opp_steps) * 0.5)
    rows, iso, timelines = [], {}, {}

    def pair(label, env_prod, env_opp, cap_gib=None, poller=None):
        """Opportunistic first; production once the opportunistic job holds its working set."""
        opp = TrainJob(f"{label}-opp", args, env_opp, log_dir, OPP_SEED, cap_gib, opp_steps)
        opp.wait_for_step(args.head_start, timeout)
        prod = TrainJob(f"{label}-prod", args, env_prod, log_dir, PROD_SEED, cap_gib)
        got = {"prod": prod.finish(timeout)}
        got["opp"] = opp.finish(timeout)
        if poller:
            timelines[label] = poller.stop()
        return got

    def row(label, got, **extra):
        r = {"config": label, "status": "ok", **extra, **analyse(iso, got)}
        if any(got[c].get("outcome") in ("crashed", "timeout") for c in got):
            r.update(status="failed", reason="; ".join(f"{c}: {outcome_text(got[c])}" for c in got))
        rows.append(r)
        print(f"  [S4] {label}: prod {r['prod_outcome']}; opp {r['opp_outcome']}", flush=True)

    # Isolated, one after the other: the reference rates and weights.
    for cls, seed, steps in (("prod", PROD_SEED, args.steps), ("opp", OPP_SEED, opp_steps)):
        iso[cls] = TrainJob(f"isolated-{cls}", args, base_env, log_dir, seed, steps=steps).finish(timeout)
        rows.append({"config": f"isolated-{cls}", "status": "ok" if iso[cls].get("outcome") == "completed" else "failed",
                     f"{cls}_outcome": outcome_text(iso[cls]),
                     f"{cls}_peak_reserved_gib": gib(iso[cls].get("max_memory_reserved"))})
        if rows[-1]["status"] != "ok":
            rows[-1]["reason"] = outcome_text(iso[cls])
        print(f"  [S4] isolated-{cls}: {outcome_text(iso[cls])}", flush=True)

    half = capacity / 2
    if "time-slicing" not in args.skip:
        row("time-slicing", pair("time-slicing", base_env, base_env, cap_gib=half),
            how=f"{capacity:g} GiB split {half:g} + {half:g} (torch per-process memory fraction)")
    if "mps" not in args.skip:
        if pool.mps.running or pool.mps.start():
            env = dict(base_env, **pool.mps.env(), CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=f"0={int(half * 1024)}MB")
            row("mps", pair("mps", env, env),
                how=f"{capacity:g} GiB split {half:g} + {half:g} (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT)")
            pool.mps.stop()
        else:
            rows.append({"config": "mps", "status": "not run", "reason": f"MPS unavailable: {pool.mps.error}"})

    shim = os.path.abspath(args.shim) if args.shim else None
    for oversubscribe in (False, True):
        label = "gpushare" if oversubscribe else "gpushare-no-oversubscribe"
        if label in args.skip:
            continue
        if not args.gpushare_daemon or not shim or not os.path.exists(shim):
            rows.append({"config": label, "status": "not run",
                         "reason": "needs --gpushare-daemon and --shim" if not args.gpushare_daemon
                         else f"shim not found at {shim}"})
            continue
        sock = os.path.join(pool.root, f"s4-{int(oversubscribe)}.sock")
        config = {"socket": {"path": sock}, "production": [{"uid": os.getuid()}], "policy": {"default": "none"},
                  "tick_ms": 50, "log_level": "debug",
                  "memory": {"capacity": f"{capacity:g}G", "oversubscribe": oversubscribe}}
        proc, error = start_daemon(args.gpushare_daemon, config, os.path.join(log_dir, f"gpushared-{label}.json"),
                                   os.path.join(log_dir, f"gpushared-{label}.log"))
        if error:
            rows.append({"config": label, "status": "not run", "reason": error})
            stop_daemon(proc)
            continue

        def env(cls):
            return dict(base_env, LD_PRELOAD=shim, GPUSHARE_SOCKET=sock, GPUSHARE_PRIORITY=cls,
                        GPUSHARE_REQUIRE_DAEMON="1")

        poller = CtlPoller(args.gpusharectl, sock) if args.gpusharectl else None
        try:
            row(label, pair(label, env("production"), env("opportunistic"), poller=poller),
                how=f"gpushared memory.capacity {capacity:g}G, oversubscribe {str(oversubscribe).lower()}")
        finally:
            stop_daemon(proc)
        if poller and timelines.get(label):
            rows[-1]["swaps"] = max(((j.get("swaps_out") or 0, j.get("swaps_in") or 0)
                                     for s in timelines[label] for j in s["jobs"] if j.get("class") == "opportunistic"),
                                    default=(0, 0))
    return {"workloads": {"production": f"resnet50 b{args.batch} x {args.steps} steps (seed {PROD_SEED})",
                          "opportunistic": f"resnet50 b{args.batch} x {opp_steps} steps (seed {OPP_SEED})"},
            "capacity_gib": capacity, "head_start_steps": args.head_start, "rows": rows,
            "timelines": timelines, "isolated": {c: {k: v for k, v in r.items()} for c, r in iso.items()}}
