"""Repetitions, interleaving, the time budget, and the statistics every scenario shares.

A scenario is a list of units (one configuration each: a name and a function that returns the
placements of one window). Each repetition runs every unit once, in an order shuffled anew per
repetition, so slow drift of the machine spreads over all configurations instead of landing on
one block of them.
"""

import gzip
import json
import os
import random
import statistics
import time
from dataclasses import dataclass

import harness


@dataclass
class Unit:
    name: str  # the configuration, e.g. "mps-thr30" or "mps@0.5"
    placements: object  # (rep) -> [harness.Placement]
    window_s: float  # the window's length (for throughput and the time estimate)


class Experiment:
    def __init__(self, scenario, args, out_dir, tmp=None):
        self.scenario = scenario
        self.args = args
        self.out_dir = out_dir
        os.makedirs(out_dir, exist_ok=True)
        self.pool = harness.Pool(out_dir, warmup=args.warmup, root=tmp)
        self.gpu = harness.Gpu()
        self.started = time.time()
        self.deadline = self.started + args.budget_s
        self.windows = []  # every window, measured or not, in the order run
        self.notes = []
        self.gpushare = None  # a gpushare_hook.Gpushare when the scenario has gpushare rows
        self.gpushare_specs = []  # its rows' workers (WorkerSpec), restarted by --fresh-gpushare

    def remaining_s(self):
        return self.deadline - time.time()

    def measure(self, unit, rep):
        """One window of `unit`; returns its per-tag results, or None (the reason is recorded)."""
        record = {"config": unit.name, "rep": rep, "window_s": unit.window_s}
        needed = unit.window_s + 3.0
        if self.remaining_s() < needed:
            record["skipped"] = f"time budget of {self.args.budget_s:.0f} s spent"
            self.windows.append(record)
            return None
        try:
            placements = unit.placements(rep)
            w = harness.run_window(placements, self.gpu, warmup=self.args.window_warmup)
        except harness.WorkerError as e:
            record["error"] = str(e)
            self.windows.append(record)
            print(f"  [{self.scenario}] rep {rep} {unit.name}: {e}", flush=True)
            return None
        record.update(w)
        self.windows.append(record)
        return w["results"]

    def run_reps(self, units, reps, on_result=None):
        """Every unit once per repetition, shuffled per repetition (seeded, so reruns match)."""
        for rep in range(reps):
            if rep > 0 and getattr(self.args, "fresh_gpushare", False):
                self.restart_gpushare(rep)
            order = list(units)
            random.Random(self.args.seed * 1000 + rep).shuffle(order)
            for unit in order:
                res = self.measure(unit, rep)
                if res is not None and on_result:
                    on_result(unit, rep, res)
            print(f"  [{self.scenario}] rep {rep + 1}/{reps} done, {time.time() - self.started:.0f} s", flush=True)

    def restart_gpushare(self, rep):
        """Every gpushare row's daemon and jobs afresh (their logs named -repN): a repetition is then
        a run of the policy's learning of its own, not the continuation of the last one's. On the
        H100 one build's budget harvested 0.14x of MPS-prio's in one call and 0.88x in the next,
        each call's three repetitions one run of its learning (docs/benchmarks.md 4n)."""
        if not self.gpushare or not self.gpushare_specs:
            return
        for spec in self.gpushare_specs:
            worker = self.pool.workers.pop(spec.label, None)
            if worker:
                worker.stop()
            self.pool.failed.pop(spec.label, None)  # tried again below
        self.gpushare.stop()
        self.gpushare.start_daemons(self.pool.log_dir, suffix=f"-rep{rep}")
        self.pool.start(self.gpushare_specs)

    def ok_windows(self, config):
        return [w for w in self.windows if w["config"] == config and "results" in w]

    def why_missing(self, config):
        """The reason a configuration has no measured window (error or budget), if any."""
        for w in self.windows:
            if w["config"] == config and ("error" in w or "skipped" in w):
                return w.get("error") or w.get("skipped")
        return "not measured"

    def close(self):
        self.pool.stop_workers()
        if self.gpushare:
            self.gpushare.stop()
        self.pool.close()


def read_raw(path):
    """The runs of a raw file (<scenario>-raw.json.gz, run.py) or of an extract of one
    (write_extract): [{"config", "rep", "results": {job: {...}} or None}]."""
    with gzip.open(path, "rt") as f:
        return json.load(f)


def write_extract(path, out, keep):
    """Writes to `out` the runs of the raw file `path` with only the lists `keep` names per job
    (e.g. {"prod": ["latencies"], "opp": ["completions"]}), each value to 10 us: what an analysis
    reads of a raw file, the part docs/bench-results keeps."""
    runs = []
    for run in read_raw(path):
        results = run.get("results") or {}
        kept = {job: {name: [round(x, 5) for x in results[job].get(name, [])] for name in names}
                for job, names in keep.items() if job in results}
        runs.append({"config": run["config"], "rep": run["rep"], "results": kept})
    with gzip.open(out, "wt") as f:
        json.dump(runs, f, separators=(",", ":"))


def throughput(result, task_len, window_s):
    """Iterations completed within the task's own span, per second of the whole window."""
    return sum(1 for c in result["completions"] if c <= task_len) / window_s


def throughput_from(result, start, end):
    """Iterations completed from `start` to `end` (seconds into the window), per second of that span:
    from 0 the whole window's rate, as throughput(result, end, end); later, run.py --late-s's window
    after a policy's learning."""
    return sum(1 for c in result["completions"] if start <= c <= end) / (end - start)


def percentile(values, q):
    """Linear-interpolated percentile of a non-empty list, q in [0, 100]."""
    vals = sorted(values)
    if len(vals) == 1:
        return vals[0]
    pos = (len(vals) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)


def spread(values):
    """Median and range over repetitions: {"median", "min", "max", "n"} (None if no values)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}
