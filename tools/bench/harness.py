"""The controller's machinery: worker processes, the MPS daemon, GPU telemetry, one window.

The controller never creates a CUDA context (it would be one more tenant on the GPU); it reads
clocks through NVML (pynvml) or nvidia-smi only.
"""

import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
SMI_FIELDS = "clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used,utilization.gpu"


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process is: its label, its jobs (workload, stream priority), its environment."""

    label: str
    jobs: tuple  # ((workload name, stream priority), ...)
    env: tuple = ()  # ((name, value), ...) added to the controller's environment
    mps: bool = False  # a client of the harness's MPS daemon (otherwise kept away from it)


class WorkerError(RuntimeError):
    pass


class Worker:
    def __init__(self, spec: WorkerSpec, env: dict, log_dir: str, warmup: int):
        self.spec = spec
        self.info = None
        self.error = None
        cmd = [sys.executable, "-u", os.path.join(HERE, "worker.py"), "--warmup", str(warmup)]
        for name, prio in spec.jobs:
            cmd += ["--job", f"{name}:{prio}"]
        self.log_path = os.path.join(log_dir, f"{spec.label}.log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log, env=env, text=True, bufsize=1)
        self.seq = 0
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, msg):
        """Sends a command stamped with a sequence number; recv() skips answers to older ones."""
        self.seq += 1
        msg = dict(msg, seq=self.seq)
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise WorkerError(f"{self.spec.label}: cannot write ({e}); {self.log_tail()}")

    def recv(self, timeout):
        """The answer to the last command (late answers to earlier, failed windows are dropped)."""
        deadline = time.time() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                raise WorkerError(f"{self.spec.label}: no answer in {timeout:.0f} s")
            if line is None:
                raise WorkerError(f"{self.spec.label}: exited (rc {self.proc.wait()}); {self.log_tail()}")
            msg = json.loads(line)
            if msg.get("seq") not in (None, self.seq):
                continue
            if msg["event"] in ("failed", "error"):
                raise WorkerError(f"{self.spec.label}: {msg['error'].strip().splitlines()[-1]}")
            return msg

    def log_tail(self, n=3):
        self._log.flush()
        try:
            with open(self.log_path) as f:
                lines = [l.strip() for l in f if l.strip()]
            return " | ".join(lines[-n:]) or "no output"
        except OSError:
            return "no log"

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.send({"cmd": "quit"})
                self.proc.wait(timeout=20)
            except (WorkerError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._log.close()


class Mps:
    """The harness's own MPS control daemon, in private pipe and log directories."""

    def __init__(self, root):
        self.pipe = os.path.join(root, "mps-pipe")
        self.logdir = os.path.join(root, "mps-log")
        self.ctl = shutil.which("nvidia-cuda-mps-control")
        self.running = False
        self.error = None

    def env(self):
        return {"CUDA_MPS_PIPE_DIRECTORY": self.pipe, "CUDA_MPS_LOG_DIRECTORY": self.logdir}

    def start(self):
        if not self.ctl:
            self.error = "nvidia-cuda-mps-control not found"
            return False
        os.makedirs(self.pipe, exist_ok=True)
        os.makedirs(self.logdir, exist_ok=True)
        env = dict(os.environ, **self.env())
        r = subprocess.run([self.ctl, "-d"], env=env, capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            self.error = f"nvidia-cuda-mps-control -d failed: rc {r.returncode} {r.stderr.strip()}"
            return False
        self.running = True
        return True

    def stop(self):
        if not self.running:
            return
        env = dict(os.environ, **self.env())
        try:
            subprocess.run([self.ctl], input="quit\n", env=env, capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            print("warning: MPS daemon did not quit within 30 s", file=sys.stderr)
        self.running = False

    def server_log_tail(self, n=5):
        try:
            with open(os.path.join(self.logdir, "control.log")) as f:
                return [l.rstrip() for l in f][-n:]
        except OSError:
            return []


def _physical_index():
    """The GPU this run uses, as NVML and nvidia-smi number it: BENCH_GPU_INDEX (set by
    tools/bench/gpu_lanes.sh, which runs scenarios side by side, one GPU each, and names the GPU to
    CUDA by its UUID), else CUDA_VISIBLE_DEVICES when it names one device by index, else 0."""
    for name in ("BENCH_GPU_INDEX", "CUDA_VISIBLE_DEVICES"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


class Gpu:
    """Clocks, temperature and power, read without a CUDA context."""

    def __init__(self):
        self.nvml = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(_physical_index())
        except Exception:
            self.nvml = None

    def sample(self):
        if self.nvml is None:
            return None
        n, h = self.nvml, self.handle
        try:
            return {"sm_mhz": n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
                    "mem_mhz": n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
                    "temp_c": n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
                    "power_w": n.nvmlDeviceGetPowerUsage(h) / 1000.0,
                    "mem_used_mib": n.nvmlDeviceGetMemoryInfo(h).used / 2**20}
        except Exception:
            return None

    @staticmethod
    def smi(query=SMI_FIELDS):
        """nvidia-smi's own reading (the brief asks for it before and after each run)."""
        try:
            r = subprocess.run(["nvidia-smi", "-i", str(_physical_index()), f"--query-gpu={query}",
                                "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=20)
            return r.stdout.strip() or r.stderr.strip()
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"nvidia-smi unavailable: {e}"

    @staticmethod
    def smi_full():
        try:
            return subprocess.run(["nvidia-smi", "-i", str(_physical_index())], capture_output=True,
                                  text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"nvidia-smi unavailable: {e}"

    @staticmethod
    def identity():
        q = "name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit,compute_mode"
        return Gpu.smi(q)


@dataclass
class Placement:
    """One process's part in a window: which worker, which scheme, which tasks."""

    worker: Worker
    tasks: list  # dicts with "job", "mode", "start"/"end" relative to the window's start, ...
    scheme: str = "threads"
    tags: list = field(default_factory=list)  # one result tag per task (e.g. "prod", "opp")


def run_window(placements, gpu, warmup=3, timeout_pad=30.0):
    """Warm every placement up, start all at one instant, and gather what each task measured."""
    for p in placements:
        p.worker.send({"cmd": "prepare", "jobs": sorted({t["job"] for t in p.tasks}), "warmup": warmup})
    for p in placements:
        p.worker.recv(timeout=120)
    t0 = time.time() + 0.25
    horizon = 0.0
    for p in placements:
        tasks = []
        for t in p.tasks:
            abs_t = dict(t, start=t0 + t["start"], end=t0 + t["end"])
            horizon = max(horizon, t["end"] + t.get("drain_s", 0.0))
            tasks.append(abs_t)
        p.worker.send({"cmd": "run", "scheme": p.scheme, "tasks": tasks})
    before = gpu.sample()
    samples, stop = [], threading.Event()

    def sampler():
        while not stop.wait(0.25):
            s = gpu.sample()
            if s:
                samples.append(s)

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    results = {}
    try:
        for p in placements:
            msg = p.worker.recv(timeout=horizon + timeout_pad)
            for tag, res in zip(p.tags, msg["results"]):
                results[tag] = res
    finally:
        stop.set()
        th.join()
    return {"t0": t0, "results": results, "gpu_before": before, "gpu_after": gpu.sample(),
            "gpu_during": summarize_samples(samples)}


def summarize_samples(samples):
    if not samples:
        return None
    out = {}
    for key in samples[0]:
        vals = [s[key] for s in samples]
        out[key] = {"min": min(vals), "mean": sum(vals) / len(vals), "max": max(vals)}
    return out


class Pool:
    """Starts the workers a scenario needs, all at once, and stops them (and MPS) at the end."""

    def __init__(self, out_dir, warmup=10, root=None):
        # Short private paths: MPS pipes and Unix sockets have length limits (sun_path: 108 bytes).
        self.root = root or tempfile.mkdtemp(prefix="bench-")
        self.log_dir = os.path.join(out_dir, "logs")
        os.makedirs(self.root, exist_ok=True)
        os.makedirs(self.log_dir, exist_ok=True)
        self.warmup = warmup
        self.workers = {}
        self.seen = {}  # every worker that started, kept after it stopped (for its info)
        self.failed = {}  # label -> reason
        self.startup_s = None
        self.mps = Mps(self.root)
        # Plain workers get an empty pipe directory, so they never find an MPS daemon.
        self.no_mps_dir = os.path.join(self.root, "no-mps")
        os.makedirs(self.no_mps_dir, exist_ok=True)

    def start(self, specs, timeout=240):
        t_start = time.time()
        specs = [s for s in dict.fromkeys(specs) if s.label not in self.workers]
        if any(s.mps for s in specs) and not self.mps.running and not self.mps.error:
            self.mps.start()
        pending = []
        for s in specs:
            if s.mps and not self.mps.running:
                self.failed[s.label] = f"MPS unavailable: {self.mps.error}"
                continue
            env = dict(os.environ)
            env.update(self.mps.env() if s.mps else {"CUDA_MPS_PIPE_DIRECTORY": self.no_mps_dir})
            env.update(dict(s.env))
            env["PYTHONUNBUFFERED"] = "1"
            pending.append(Worker(s, env, self.log_dir, self.warmup))
        deadline = time.time() + timeout
        for w in pending:
            try:
                w.info = w.recv(timeout=max(1.0, deadline - time.time()))["info"]
                self.workers[w.spec.label] = w
                self.seen[w.spec.label] = w
            except WorkerError as e:
                self.failed[w.spec.label] = str(e)
                w.stop()
        self.startup_s = round(time.time() - t_start, 1)
        print(f"  started {len(pending)} workers in {self.startup_s} s; failed: {sorted(self.failed) or 'none'}",
              flush=True)
        # Which processes the driver sees, and as what (C, or M+C for an MPS client).
        with open(os.path.join(self.log_dir, "nvidia-smi-after-start.txt"), "a") as f:
            f.write(Gpu.smi_full() + "\n")

    def get(self, label):
        if label in self.failed:
            raise WorkerError(f"worker {label} unavailable: {self.failed[label]}")
        if label not in self.workers:
            raise WorkerError(f"worker {label} was never started")
        return self.workers[label]

    def stop_workers(self):
        for w in self.workers.values():
            w.stop()
        self.workers.clear()

    def close(self):
        """Workers first (an MPS daemon waits for its clients), then MPS, then the private files."""
        self.stop_workers()
        self.mps.stop()
        shutil.rmtree(self.root, ignore_errors=True)
