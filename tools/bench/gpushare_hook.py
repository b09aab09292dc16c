"""The `gpushare:POLICY` rows: both jobs under LD_PRELOAD=libgpushare.so, a gpushared per policy.

Until the rate-control policies exist these rows say "not yet". Once they do, run e.g.

  python3 tools/bench/run.py --scenario S1 --gpushare-policy tgs priority 'tgs:target=0.9' \
      --gpushare-daemon 'build/daemon/gpushared --config {config}'

The daemon command is a template: {config} (a config file the harness writes per policy, with the
socket and the policy, `name:param=value,...`), {socket} and {policy} are filled in, and the harness
waits for the socket to appear before it starts the workers that connect to it.
"""

import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import time

from harness import Placement, WorkerSpec


def start_daemon(daemon_cmd, config, config_path, log_path, timeout_s=10):
    """Writes `config` to config_path and starts gpushared from the command template; returns
    (Popen, None), or (Popen or None, why) when its socket did not appear within timeout_s."""
    sock = config["socket"]["path"]
    with open(config_path, "w") as f:
        json.dump(config, f)
    cmd = daemon_cmd.format(socket=shlex.quote(sock), policy=shlex.quote(config["policy"]["default"]),
                            config=shlex.quote(config_path))
    with open(log_path, "w") as log:
        # Its own process group: the template runs under `sh -c`, so terminating the Popen alone
        # would kill the shell and leave gpushared running; stop_daemon signals the whole group.
        proc = subprocess.Popen(cmd, shell=True, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.time() + timeout_s
    while not os.path.exists(sock) and time.time() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    if not os.path.exists(sock):
        return proc, f"gpushared did not create {sock} (see {os.path.basename(log_path)})"
    return proc, None


def _signal_group(proc, signo):
    try:
        os.killpg(proc.pid, signo)
    except ProcessLookupError:
        pass


def stop_daemon(proc):
    """Stops the daemon's whole process group (the shell and gpushared), even when the shell has
    already exited: the group outlives its leader."""
    if proc is None:
        return
    _signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(proc, signal.SIGKILL)
    proc.wait()


# "POLICY@mps", "POLICY@mps-thrN" or "POLICY@mps-prio": both jobs are also clients of the harness's
# MPS daemon, so kernels of the two can overlap on the SMs and the policy moves along MPS's
# frontier; with -thrN the opportunistic job is also confined to N % of the SMs
# (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), so that none of its kernels can hold every SM while
# production waits; with -prio it is an MPS client at client priority 1
# (CUDA_MPS_CLIENT_PRIORITY=1: the GPU schedules production's blocks first), the substrate the
# `harvest` policy is built for. "POLICY@mps-auto": the daemon runs its own MPS control daemon
# (config "mps": "auto") and its shims make the jobs its clients, production at priority 0 and
# opportunistic at 1: what an installed gpushared with "mps": "auto" does, where @mps-prio
# reproduces it with the harness's MPS daemon. "POLICY@mps-ext": gpushared with "mps": "external"
# on the harness's MPS control daemon, its shims setting the client priorities as with "auto": one
# MPS server on the GPU. With @mps-auto the GPU has two (the harness's, for its MPS rows, and
# gpushared's), and on the H200 (2026-11-26, S5) the policy `none` on gpushared's server gave the
# opportunistic job 0.53 of its solo rate where the same on the harness's gave 0.74-0.79.
_MPS_SUFFIX = re.compile(r"@mps(?:-thr(\d+)|(-prio)|(-auto)|(-ext))?$")


# "BUILD+POLICY": the row's daemon is the build named gpushared-BUILD beside the one the daemon
# command names (e.g. .carry/bin/gpushared-old), so that two builds of one policy run as rows of the
# same call, beside the same baselines and denominators; the call's spread between runs is larger
# than most changes of a policy (docs/benchmarks.md 4n).
_BUILD_PREFIX = re.compile(r"^([A-Za-z0-9_.-]+)\+")


def split_build(policy):
    """'old+harvest@mps-ext' -> ('old', 'harvest@mps-ext'); no prefix: (None, policy)."""
    m = _BUILD_PREFIX.match(policy)
    return (m.group(1), policy[m.end():]) if m else (None, policy)


def build_command(daemon_cmd, build):
    """The daemon command with its gpushared binary replaced by gpushared-BUILD (None: as it is)."""
    if build is None:
        return daemon_cmd
    cmd, n = re.subn(r"gpushared(?=\s|$)", f"gpushared-{build}", daemon_cmd, count=1)
    if n == 0:
        raise ValueError(f"{daemon_cmd!r}: no gpushared binary to replace with gpushared-{build}")
    return cmd


def split_policy(policy):
    """'tgs:target=0.9@mps-thr30' -> ('tgs', 'target=0.9', True, 30); '@mps-prio' gives 'prio' in
    place of the thread percentage; '@mps-auto' gives (.., False, 'auto'): not a client of the
    harness's MPS daemon; '@mps-ext' gives (.., True, 'ext'); no suffix: (.., False, None). A
    'BUILD+' prefix (split_build) is left out."""
    policy = split_build(policy)[1]
    m = _MPS_SUFFIX.search(policy)
    bare = policy[:m.start()] if m else policy
    name, _, params = bare.partition(":")
    if m and m.group(2):
        return name, params, True, "prio"
    if m and m.group(3):
        return name, params, False, "auto"
    if m and m.group(4):
        return name, params, True, "ext"
    thread_pct = int(m.group(1)) if m and m.group(1) else None
    if thread_pct is not None and not 1 <= thread_pct <= 100:
        raise ValueError(f"{policy}: the MPS thread percentage must be 1..100")
    return name, params, m is not None, thread_pct


class Gpushare:
    def __init__(self, shim_path, daemon_cmd, policies, run_dir, log_level="info"):
        self.log_level = log_level
        # An LD_PRELOAD list: the shim, or e.g. a sanitizer runtime first, then the shim.
        self.shim = ":".join(os.path.abspath(p) for p in shim_path.split(":")) if shim_path else None
        self.daemon_cmd = daemon_cmd
        self.policies = list(policies)
        self.run_dir = run_dir
        self.daemons = {}  # policy -> Popen
        self.errors = {}  # policy -> why its daemon is not running

    def baselines(self):
        return [f"gpushare:{p}" for p in self.policies]

    def reason(self, baseline):
        """Why this row cannot run, or None when it can."""
        policy = baseline.split(":", 1)[1]
        if not self.daemon_cmd:
            return ("not yet: the rate-control policies are not available; once gpushared has them, "
                    "pass --gpushare-daemon 'CMD {socket} {policy}'")
        missing = [p for p in (self.shim or "").split(":") if not os.path.exists(p)]
        if not self.shim or missing:
            return f"shim not found at {missing[0] if missing else self.shim}"
        return self.errors.get(policy)

    def available(self, baseline):
        return self.reason(baseline) is None

    def socket(self, policy):
        # Named by a digest of the policy, not the policy itself: a Unix socket's path holds at
        # most 107 bytes, and on the H100 (2026-11-27, call 60) a row with two period settings named
        # its socket in 141, so gpushared refused it (rightly, and said so) and the row did not run.
        return os.path.join(self.run_dir, f"gpushared-{hashlib.sha1(policy.encode()).hexdigest()[:12]}.sock")

    def start_daemons(self, log_dir, suffix=""):
        """A daemon per policy, its config and log in log_dir (named with `suffix`, e.g. "-rep1")."""
        for policy in self.policies:
            if self.reason(f"gpushare:{policy}") is not None:
                continue
            sock = self.socket(policy)
            # gpushared takes its settings from a config file: one per policy, root may claim
            # production (the harness runs as root), the policy on every device.
            name, params, _, substrate = split_policy(policy)
            config = {"socket": {"path": sock}, "production": [{"uid": os.getuid()}],
                      "policy": {"default": name}, "tick_ms": 50, "log_level": self.log_level}
            if substrate == "auto":
                config["mps"] = "auto"
            elif substrate == "ext":  # the harness's MPS daemon (harness.Mps)
                config["mps"] = "external"
                config["mps_pipe_directory"] = os.path.join(self.run_dir, "mps-pipe")
            if params:
                config["policy"]["parameters"] = {name: {k: float(v) for k, v in
                                                         (kv.split("=") for kv in params.split(","))}}
            tag = policy.replace(':', '_').replace(',', '_')
            build, _ = split_build(policy)
            try:
                daemon_cmd = build_command(self.daemon_cmd, build)
            except ValueError as e:
                self.errors[policy] = str(e)
                continue
            proc, error = start_daemon(daemon_cmd, config, os.path.join(log_dir, f"gpushared-{tag}{suffix}.json"),
                                       os.path.join(log_dir, f"gpushared-{policy}{suffix}.log"))
            self.daemons[policy] = proc
            if error:
                self.errors[policy] = error
            else:
                self.errors.pop(policy, None)

    def worker_specs(self, baseline, prod, opp):
        policy = baseline.split(":", 1)[1]

        def env(cls):
            return (("LD_PRELOAD", self.shim), ("GPUSHARE_SOCKET", self.socket(policy)),
                    ("GPUSHARE_PRIORITY", cls), ("GPUSHARE_REQUIRE_DAEMON", "1"))

        _, _, mps, thread_pct = split_policy(policy)
        opp_env = env("opportunistic")
        if thread_pct == "prio":
            opp_env += (("CUDA_MPS_CLIENT_PRIORITY", "1"),)
        elif thread_pct in ("auto", "ext"):
            pass  # gpushared's MPS: its shim sets the client priority (and any thread limit)
        elif thread_pct is not None:
            opp_env += (("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", str(thread_pct)),)
        return [WorkerSpec(f"gs-{policy}-prod", ((prod, 0),), env("production"), mps=mps),
                WorkerSpec(f"gs-{policy}-opp", ((opp, 0),), opp_env, mps=mps)]

    def placements(self, pool, baseline, prod_task, opp_task):
        policy = baseline.split(":", 1)[1]
        return [Placement(pool.get(f"gs-{policy}-prod"), [prod_task], tags=["prod"]),
                Placement(pool.get(f"gs-{policy}-opp"), [opp_task], tags=["opp"])]

    def stop(self):
        for proc in self.daemons.values():
            stop_daemon(proc)
        self.daemons.clear()
