#!/usr/bin/env python3
"""The benchmark harness's one entry point.

  python3 tools/bench/run.py --scenario S1 --out /tmp/bench/s1 [--window 8 --reps 3]

Writes <out>/<scenario>.json (rows and per-window telemetry), <scenario>-raw.json.gz (every
completion time and latency), <scenario>.md (the table) and <scenario>.png (the plot).
See tools/bench/README.md for the scenarios, baselines and method.
"""

import argparse
import datetime
import gzip
import json
import os
import shlex
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import report  # noqa: E402
import scenario_pair  # noqa: E402
import scenario_memory  # noqa: E402
import scenario_rotation  # noqa: E402
import scenario_single  # noqa: E402
import workloads  # noqa: E402
from experiment import Experiment  # noqa: E402

SCENARIOS = {
    "S1": (scenario_pair.run_s1, "training + training, closed loop", 8.0),
    "S2": (scenario_pair.run_s2, "Poisson inference (production) beside training (opportunistic)", 6.0),
    "S3": (scenario_single.run_s3, "N inference clients", 5.0),
    "S4": (scenario_memory.run_s4, "memory oversubscription", 0.0),
    "S5": (scenario_pair.run_s5, "production on/off bursts", 10.0),
    "S6": (scenario_single.run_s6, "one job with and without the shim", 5.0),
    "S7": (scenario_rotation.run_s7, "more opportunistic memory than the device holds: rotation", 0.0),
}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", required=True, help="S1..S7, or several separated by commas")
    ap.add_argument("--out", required=True, help="output folder (one sub-folder per scenario if several)")
    ap.add_argument("--window", type=float, help="measurement window, seconds (default per scenario)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of every configuration")
    ap.add_argument("--budget-s", type=float, default=510.0,
                    help="per scenario: windows that would end later are skipped and say so")
    ap.add_argument("--warmup", type=int, default=10, help="iterations each job runs when its process starts")
    ap.add_argument("--window-warmup", type=int, default=3, help="iterations before each window's barrier")
    ap.add_argument("--isolated-windows", type=int, default=2,
                    help="S1: windows of each isolated job per repetition (NT's denominator is their median)")
    ap.add_argument("--prod", help="production workload (S1/S2/S5) or client workload (S3)")
    ap.add_argument("--opp", help="opportunistic workload (S1/S2/S5)")
    ap.add_argument("--skip", nargs="*", default=[], help="baselines to leave out (their rows say so)")
    ap.add_argument("--loads", type=float, nargs="+", default=[0.3, 0.5, 0.7], help="S2: fractions of capacity")
    ap.add_argument("--capacity-windows", type=int, default=3, help="S2: windows whose median is the capacity")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 3, 5, 7], help="S3: client counts")
    ap.add_argument("--workloads", nargs="+", help="S6: workloads to run with and without the shim")
    ap.add_argument("--on-s", type=float, default=1.0, help="S5: production burst length")
    ap.add_argument("--off-s", type=float, default=1.0, help="S5: production pause between bursts")
    ap.add_argument("--bin-s", type=float, default=0.05, help="S5: resolution of the reaction times")
    ap.add_argument("--late-s", type=float, default=0.0,
                    help="S1 and S5: also report NT over the window after this many seconds (S5: rounded down to "
                         "whole on/off periods), leaving out what a policy spends learning at the window's start")
    ap.add_argument("--prod-controls", action="store_true",
                    help="S5: also production alone as an MPS client and under the first gpushare row's shim "
                         "and daemon (rows isolated-prod-mps, isolated-prod-gs; S1 always runs them)")
    ap.add_argument("--capacity", default="16G", help="S4: the device capacity gpushared enforces (GiB)")
    ap.add_argument("--steps", type=int, default=200, help="S4: training steps of each job")
    ap.add_argument("--opp-steps", type=int, help="S4: steps of the opportunistic job (default 3 x --steps)")
    ap.add_argument("--batch", type=int, default=96, help="S4: resnet50 batch (96 holds about 10 GiB)")
    ap.add_argument("--head-start", type=int, default=10,
                    help="S4: steps the opportunistic job runs before production starts")
    ap.add_argument("--gpusharectl", help="S4: gpusharectl command, sampled for the swap timeline")
    ap.add_argument("--rotation-jobs", default="resnet50:128:100,resnet50:64:160,resnet50:96:120",
                    help="S7: the opportunistic jobs, MODEL:BATCH:STEPS,...")
    ap.add_argument("--rotation-prod", default="resnet50:8:100",
                    help="S7: production MODEL:BATCH:STEPS (STEPS: its isolated run; beside the others it runs "
                         "until the last one ends)")
    ap.add_argument("--prod-sleep-ms", type=float, default=100, help="S7: production's CPU time after each step")
    ap.add_argument("--min-turn-ms", type=int, default=5000, help="S7: memory.rotation.min_turn_ms of the rows")
    ap.add_argument("--gpushare-sim", help="S7: gpushare-sim command, for the search's order")
    ap.add_argument("--shim", default=".carry/libgpushare.so",
                    help="libgpushare.so for S6 and gpushare rows (or an LD_PRELOAD list: a "
                         "sanitizer runtime first, then the shim)")
    ap.add_argument("--gpushare-daemon", help="command template starting gpushared: {socket} {policy}")
    ap.add_argument("--gpushare-log-level", default="info",
                    choices=["trace", "debug", "info", "warn", "error"],
                    help="gpushared's log level (trace: every tick's observations and gates)")
    ap.add_argument("--gpushare-policy", nargs="*", default=["tgs", "priority"], help="gpushare rows")
    ap.add_argument("--fresh-gpushare", action="store_true",
                    help="S1/S2/S5: start every gpushare row's daemons and jobs afresh before each repetition, "
                    "so that its repetitions are independent runs of the policy's learning (by default they "
                    "live through the part: one run of it)")
    ap.add_argument("--tmp", help="private folder for MPS pipes and sockets (default: a new temp dir)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    for name in filter(None, [args.prod, args.opp] + (args.workloads or [])):
        workloads.parse(name)  # fail before any process starts
    try:
        scenario_memory.parse_gib(args.capacity)
    except ValueError as e:
        ap.error(f"--capacity: {e}")
    for flag, text in (("--rotation-jobs", args.rotation_jobs), ("--rotation-prod", args.rotation_prod)):
        try:
            scenario_rotation.parse_jobs(text)
        except ValueError as e:
            ap.error(f"{flag}: {e}")
    return args


def run_one(scenario, args, out_dir, command):
    fn, title, default_window = SCENARIOS[scenario]
    args.window = args.window_given or default_window
    exp = Experiment(scenario, args, out_dir, tmp=args.tmp)
    smi_before = harness.Gpu.smi()
    t_start = time.time()
    print(f"[{scenario}] {title}: window {args.window} s, {args.reps} reps -> {out_dir}", flush=True)
    try:
        result = fn(exp)
    finally:
        exp.close()
    smi_after = harness.Gpu.smi()
    sm = [w["gpu_during"]["sm_mhz"] for w in exp.windows if w.get("gpu_during")]
    infos = {label: w.info for label, w in exp.pool.seen.items()}
    first = next(iter(infos.values()), {}) or {}
    result.update(scenario=scenario, title=title, meta={
        "date": datetime.date.today().isoformat(), "command": command, "window_s": args.window,
        "reps": args.reps, "gpu": harness.Gpu.identity(), "torch": first.get("torch"), "cuda": first.get("cuda"),
        "cudnn": first.get("cudnn"), "smi_before": smi_before, "smi_after": smi_after,
        "sm_clock_range": f"{min(s['min'] for s in sm)}–{max(s['max'] for s in sm)} MHz" if sm else None,
        "elapsed_s": round(time.time() - t_start, 1), "startup_s": exp.pool.startup_s,
        "workers": infos, "failed_workers": exp.pool.failed,
        "mps_log": exp.pool.mps.server_log_tail()})
    result["windows"] = [{k: v for k, v in w.items() if k != "results"} for w in exp.windows]
    raw = [{"config": w["config"], "rep": w["rep"], "results": w.get("results")} for w in exp.windows]
    base = os.path.join(out_dir, scenario)
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=1, default=str)
    with gzip.open(base + "-raw.json.gz", "wt") as f:
        json.dump(raw, f)
    md = report.markdown(result)
    why = report.plot(result, base + ".png")
    if why:
        md += f"\n(no plot: {why})\n"
    with open(base + ".md", "w") as f:
        f.write(md)
    print(md, flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    args.window_given = args.window
    command = "python3 tools/bench/run.py " + " ".join(shlex.quote(a) for a in argv)
    # A SIGTERM (the device's time limit, a user) must still stop MPS and the workers: turn it
    # into SystemExit so every `finally` runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    scenarios = [s.strip().upper() for s in args.scenario.split(",")]
    for s in scenarios:
        if s not in SCENARIOS:
            sys.exit(f"unknown scenario {s}: choose from {', '.join(SCENARIOS)}")
    for s in scenarios:
        out = args.out if len(scenarios) == 1 else os.path.join(args.out, s.lower())
        run_one(s, args, out, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
