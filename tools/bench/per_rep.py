#!/usr/bin/env python3
"""Production's speed per repetition of an S5 run, each against the isolated run of its own
repetition, from the harness's raw file (S5-raw.json.gz, run.py) or the extract of it that
docs/bench-results keeps (callN-PART-prod.json.gz: the same list, production's completions only).

The harness's table divides every row's production by the median of the isolated runs. Where
production's own speed moves between repetitions (a launch-bound job on a shared host ran 111 to
226 it/s alone within one call, 2026-11-27 call 69), that median hides whether a row lost speed or
met a slow repetition. This prints, for each row:
  - its production's requests (iterations) completed in the window over those of the isolated
    run of the same repetition (the repetitions are interleaved: the rows of one repetition run
    one after another), and their mean;
  - the same pooled over the repetitions by tenth of the on-phase (completions at each point of
    production's busy phase, folded over every whole on/off period of the window), against the
    isolated runs': a loss at production's return shows in the first tenths, a steady one in all.

Usage: python3 tools/bench/per_rep.py --window W --on ON --off OFF RAW.json.gz
       python3 tools/bench/per_rep.py --extract OUT.json.gz RAW.json.gz  # the extract to keep
  e.g. python3 tools/bench/per_rep.py --window 9 --on 2 --off 1 \
         docs/bench-results/2026-11-27-s/call69-rinf32-prod.json.gz
"""
import argparse
import gzip
import json
import statistics

from scenario_pair import paired_ratios

TENTHS = 10


def production_runs(path):
    """{row: {repetition: production's completion times}} of a raw file."""
    with gzip.open(path, "rt") as f:
        raw = json.load(f)
    rows = {}
    for run in raw:
        prod = (run.get("results") or {}).get("prod")
        if prod and "completions" in prod:
            rows.setdefault(run["config"], {})[run["rep"]] = prod["completions"]
    return rows


def extract(path, out):
    """Writes production's completions of every run in `path` (5 decimals) to `out`."""
    runs = [{"config": row, "rep": rep, "results": {"prod": {"completions": [round(t, 5) for t in times]}}}
            for row, reps in production_runs(path).items() for rep, times in reps.items()]
    with gzip.open(out, "wt") as f:
        json.dump(runs, f, separators=(",", ":"))


def in_window(times, window):
    """The completions the harness counts in the window (experiment.throughput_from: both ends)."""
    return [t for t in times if 0 <= t <= window]


def paired(rows, window):
    """{row: [its production over the isolated run's, per repetition with both]}
    (scenario_pair.paired_ratios, as the harness's `prod NT (paired)`)."""
    def counts(reps):
        return {rep: len(in_window(t, window)) for rep, t in reps.items()}
    isolated = counts(rows["isolated-prod"])
    return {row: paired_ratios(counts(reps), isolated) for row, reps in rows.items()}


def by_tenth(times, window, on, off):
    """Completions in each tenth of the on-phase, over every period that starts in the window."""
    counts = [0] * TENTHS
    for t in in_window(times, window):
        phase = t % (on + off)
        if phase < on:
            counts[min(TENTHS - 1, int(phase / on * TENTHS))] += 1
    return counts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=float, help="the run's window, seconds")
    ap.add_argument("--on", type=float, help="production's on-phase, seconds")
    ap.add_argument("--off", type=float, help="production's off-phase, seconds")
    ap.add_argument("--extract", metavar="OUT", help="write production's completions to OUT instead")
    ap.add_argument("raw", help="S5-raw.json.gz")
    args = ap.parse_args(argv)
    if args.extract:
        return extract(args.raw, args.extract)
    if None in (args.window, args.on, args.off):
        ap.error("--window, --on and --off are needed")
    rows = production_runs(args.raw)
    isolated = rows.get("isolated-prod")
    if not isolated:
        raise SystemExit(f"{args.raw}: no isolated-prod runs")
    iso_tenths = [sum(c) / len(isolated) for c in
                  zip(*(by_tenth(t, args.window, args.on, args.off) for t in isolated.values()))]
    print("| row | per repetition, against its own isolated run | mean | by tenth of the on-phase, "
          "against the isolated runs |")
    print("|---|---|---|---|")
    for row, ratios in paired(rows, args.window).items():
        reps = rows[row]
        tenths = [sum(c) / len(reps) for c in
                  zip(*(by_tenth(t, args.window, args.on, args.off) for t in reps.values()))]
        profile = " ".join(f"{a / b:.2f}" if b else "–" for a, b in zip(tenths, iso_tenths))
        mean = f"{statistics.fmean(ratios):.3f}" if ratios else "–"
        print(f"| {row} | {' '.join(f'{r:.2f}' for r in ratios)} | {mean} | {profile} |")


if __name__ == "__main__":
    main()
