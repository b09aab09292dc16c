#!/usr/bin/env python3
"""Does a second run reproduce the first? A markdown table, metric by metric.

  python3 tools/bench/compare.py first/S1.json second/S1.json [--metrics prod_its opp_its prod_nt ...]

For each configuration and metric: both runs' median [min–max], and whether the second run's
median lies inside the first run's range ("inside"), or the two ranges at least overlap
("overlap"), or neither ("apart"). Throughputs are counted in whole iterations, so it/s ranges
are widened by one iteration per window before they are compared.

With --pooled (S1 only), NT is recomputed from both runs' raw files (<name>-raw.json.gz beside
each JSON) against one denominator: the median of every isolated window of both runs. That
separates the noise of the shared windows from the noise of the isolated ones.
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402
from experiment import read_raw, spread, throughput  # noqa: E402

DEFAULT_METRICS = ("prod_its", "opp_its", "prod_nt", "opp_nt", "total_nt")


def verdict(a, b, quantum=0.0):
    if not a or not b:
        return "–"
    if a["min"] - quantum <= b["median"] <= a["max"] + quantum:
        return "inside"
    if b["min"] - quantum <= a["max"] + quantum and a["min"] - quantum <= b["max"] + quantum:
        return "overlap"
    return "apart"


def compare(first, second, metrics):
    quantum = 1.0 / min(first["meta"]["window_s"], second["meta"]["window_s"])
    by2 = {r["config"]: r for r in second["rows"]}
    lines, counts = [], {}
    for r1 in first["rows"]:
        r2 = by2.get(r1["config"])
        if r1.get("status") != "ok" or not r2 or r2.get("status") != "ok":
            continue
        for m in metrics:
            if not r1.get(m) or not r2.get(m):
                continue
            v = verdict(r1[m], r2[m], quantum if m.endswith("_its") else 0.0)
            counts[v] = counts.get(v, 0) + 1
            lines.append([r1["config"], m, report.fmt(r1[m], 3), report.fmt(r2[m], 3), v])
    table = report._table(["configuration", "metric", "first run", "second run", "second median vs first range"],
                          lines)
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    return table + f"\n\n{summary}\n"


def _window_its(json_path):
    """(config, rep) -> {tag: it/s} from the raw file beside a result JSON, and the window."""
    with open(json_path) as f:
        window = json.load(f)["meta"]["window_s"]
    raw = read_raw(json_path[: -len(".json")] + "-raw.json.gz")
    return {(w["config"], w["rep"]): {tag: throughput(r, window, window) for tag, r in w["results"].items()}
            for w in raw if w.get("results")}, window


def pooled(first_path, second_path):
    (run1, w1), (run2, w2) = _window_its(first_path), _window_its(second_path)
    runs = [run1, run2]
    iso = {}
    for role in ("prod", "opp"):
        vals = [its[role] for run in runs for (cfg, _), its in run.items()
                if cfg.split("#")[0] == f"isolated-{role}"]
        iso[role] = statistics.median(vals)
    # One iteration per window, in NT units: the finest difference a window can show.
    quantum = {role: 1.0 / min(w1, w2) / iso[role] for role in iso}
    quantum["total"] = quantum["prod"] + quantum["opp"]
    configs = sorted(dict.fromkeys(cfg for run in runs for (cfg, _) in run),
                     key=lambda c: (not c.startswith("isolated"), c))
    lines = []
    for cfg in configs:
        cells, stats = [], []
        for run in runs:
            per = {"prod": [], "opp": [], "total": []}
            for (c, _), its in run.items():
                if c != cfg:
                    continue
                nts = {role: its[role] / iso[role] for role in its}
                for role, v in nts.items():
                    per[role].append(v)
                if len(nts) == 2:
                    per["total"].append(sum(nts.values()))
            stats.append({k: spread(v) for k, v in per.items()})
        for k in ("prod", "opp", "total"):
            if stats[0][k] and stats[1][k]:
                cells += [report.fmt(stats[0][k], 3), report.fmt(stats[1][k], 3), verdict(stats[0][k], stats[1][k], quantum[k])]
            else:
                cells += ["–", "–", "–"]
        lines.append([cfg] + cells)
    head = (f"isolated medians over both runs: production {iso['prod']:.2f} it/s, "
            f"opportunistic {iso['opp']:.2f} it/s; verdicts allow one iteration per window\n\n")
    return head + report._table(["configuration", "prod NT 1st", "prod NT 2nd", "", "opp NT 1st", "opp NT 2nd", "",
                                 "total NT 1st", "total NT 2nd", ""], lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("first")
    ap.add_argument("second")
    ap.add_argument("--metrics", nargs="+", default=list(DEFAULT_METRICS))
    ap.add_argument("--pooled", action="store_true", help="S1: NT against the isolated median of both runs")
    args = ap.parse_args(argv)
    if args.pooled:
        print(pooled(args.first, args.second))
        return 0
    with open(args.first) as f1, open(args.second) as f2:
        print(compare(json.load(f1), json.load(f2), args.metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
