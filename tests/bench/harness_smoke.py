"""Runs the harness's S1 and S5 on the no-GPU "sleep" workload and checks the tables they write, that each
repetition's gpushare row ran under a daemon of its own (--fresh-gpushare), and that it leaves no
gpushared behind, whether it passes or fails."""
import json
import os
import signal
import subprocess
import sys
import tempfile


def processes_naming(text):
    """Pids of this user's processes whose command line contains `text` (our temp folder, which
    names the daemon's config): the daemons this run started, never another run's."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and "gpushared" in cmdline:
            pids.append(int(entry))
    return pids


run_py, gpushared, shim = sys.argv[1:4]
problems = []


def run_harness(out, scenario_args):
    """run.py on the sleep workload with one gpushare row (tgs, fresh daemons); whatever happens,
    nothing of the run may still be running afterwards: reported and killed."""
    cmd = [sys.executable, run_py, "--out", out, "--prod", "sleep_train_b1", "--opp", "sleep_train_b1",
           "--shim", shim, "--gpushare-daemon", gpushared + " --config {config}", "--gpushare-policy", "tgs",
           "--fresh-gpushare"] + scenario_args
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    except subprocess.TimeoutExpired as e:
        r = subprocess.CompletedProcess(cmd, -1, e.stdout or "", e.stderr or "")
    left = processes_naming(out)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if left:
        problems.append(f"left {len(left)} gpushared running after run.py exited: pids {left}")
    return r


# S5 with --late-s: every on/off measure also over the window's second half (whole periods); with
# --prod-controls, production's on/off alone under the gpushare row's shim and daemon too.
with tempfile.TemporaryDirectory() as out:
    r = run_harness(out, ["--scenario", "S5", "--window", "4", "--reps", "1", "--on-s", "1", "--off-s", "1",
                          "--late-s", "2", "--prod-controls", "--skip", "mps", "mps-prio", "mps-thr10", "mps-thr20", "mps-thr30",
                          "streams", "ticktock", "sequential"])
    if r.returncode != 0:
        problems.append(f"run.py S5 failed ({r.returncode}):\n{str(r.stdout)[-2000:]}\n{str(r.stderr)[-2000:]}")
    else:
        result = json.load(open(os.path.join(out, "S5.json")))
        if result.get("late_s") != 2:
            problems.append(f"S5's late span should start at 2 s: {result.get('late_s')}")
        for row in result["rows"]:
            if row["config"] in ("time-slicing", "gpushare:tgs", "isolated-prod-gs"):
                control = row["config"].startswith("isolated")  # production alone: no opportunistic NT
                for key in ("prod_nt", "prod_nt_late") + (() if control else ("opp_nt_off_late",)):
                    if not 0.8 <= (row.get(key) or {}).get("median", 0) <= 1.25:
                        problems.append(f"S5 {row['config']}: {key} should be near 1: {row.get(key)}")
        if "isolated-prod-gs" not in {row["config"] for row in result["rows"]}:
            problems.append(f"S5 --prod-controls should add isolated-prod-gs: {result['rows']}")
        if "| isolated-prod-gs |" not in open(os.path.join(out, "S5.md")).read():
            problems.append("S5.md lacks the isolated-prod-gs row")

with tempfile.TemporaryDirectory() as out:
    r = run_harness(out, ["--scenario", "S1", "--window", "1", "--reps", "2", "--late-s", "0.5"])
    if r.returncode != 0:
        problems.append(f"run.py failed ({r.returncode}):\n{str(r.stdout)[-2000:]}\n{str(r.stderr)[-2000:]}")
    else:
        result = json.load(open(os.path.join(out, "S1.json")))
        rows = {row["config"]: row for row in result["rows"]}
        for config in ("time-slicing", "sequential", "gpushare:tgs"):
            if rows.get(config, {}).get("status") != "ok":
                problems.append(f"{config}: {rows.get(config)}")
        for config in ("mps", "mps-thr10", "mps-prio"):  # no MPS here: the row says why
            if rows.get(config, {}).get("status") == "ok" or not rows.get(config, {}).get("reason"):
                problems.append(f"{config} should say why it did not run: {rows.get(config)}")
        # Production alone under the first gpushare row's shim and daemon: the control that tells
        # what the shim costs production from what sharing does.
        control = rows.get("isolated-prod-gs", {})
        if control.get("status") != "ok" or not control.get("prod_nt"):
            problems.append(f"isolated-prod-gs should be measured: {control}")
        # --fresh-gpushare: the second repetition ran under a daemon of its own, with jobs of its own.
        logs = os.path.join(out, "logs")
        for name in ("gpushared-tgs.log", "gpushared-tgs-rep1.log"):
            if not os.path.exists(os.path.join(logs, name)):
                problems.append(f"no daemon log {name}: {sorted(os.listdir(logs))}")
        # (the sleep workload makes no CUDA call, so its jobs never register: their restart shows
        # in the harness's own report)
        if "started 2 workers" not in r.stdout:
            problems.append(f"the gpushare row's two jobs should start again:\n{r.stdout[-2000:]}")
        table = open(os.path.join(out, "S1.md")).read()
        if "| time-slicing |" not in table:
            problems.append("S1.md lacks the time-slicing row")
        # --late-s: each shared row also over the window's second half, against the isolated
        # windows' second halves (the sleep workload runs at the same rate in both).
        for config in ("time-slicing", "gpushare:tgs"):
            late = rows.get(config, {}).get("prod_nt_late") or {}
            if not 0.8 <= late.get("median", 0) <= 1.25:
                problems.append(f"{config}: production's NT after 0.5 s should be near 1: {late}")
        if "prod NT after 0.5 s" not in table:
            problems.append("S1.md lacks the late columns")
if problems:
    sys.exit("\n".join(problems))
print(f"harness smoke: {len(rows)} rows, no gpushared left behind; 1 passed, 0 failed")
