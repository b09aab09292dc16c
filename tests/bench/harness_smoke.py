"""Runs the harness's S1 on the no-GPU "sleep" workload and checks the table it writes."""
import json
import os
import subprocess
import sys
import tempfile

run_py, gpushared, shim = sys.argv[1:4]
with tempfile.TemporaryDirectory() as out:
    cmd = [sys.executable, run_py, "--scenario", "S1", "--out", out, "--window", "1", "--reps", "2",
           "--prod", "sleep_train_b1", "--opp", "sleep_train_b1", "--shim", shim,
           "--gpushare-daemon", gpushared + " --config {config}", "--gpushare-policy", "tgs"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=170)
    if r.returncode != 0:
        sys.exit(f"run.py failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    result = json.load(open(os.path.join(out, "S1.json")))
    rows = {row["config"]: row for row in result["rows"]}
    problems = []
    for config in ("time-slicing", "sequential", "gpushare:tgs"):
        if rows.get(config, {}).get("status") != "ok":
            problems.append(f"{config}: {rows.get(config)}")
    for config in ("mps", "mps-thr10", "mps-prio"):  # no MPS on this machine: the row says why
        if rows.get(config, {}).get("status") == "ok" or not rows.get(config, {}).get("reason"):
            problems.append(f"{config} should say why it did not run: {rows.get(config)}")
    table = open(os.path.join(out, "S1.md")).read()
    if "| time-slicing |" not in table:
        problems.append("S1.md lacks the time-slicing row")
    if problems:
        sys.exit("\n".join(problems))
print(f"harness smoke: {len(rows)} rows; 1 passed, 0 failed")
