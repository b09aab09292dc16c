#!/usr/bin/env python3
"""Production's speed per repetition of an S5 run, each against the isolated run of its own
repetition, from the harness's raw file (S5-raw.json.gz, run.py) or the extract of it that
docs/bench-results keeps (callN-PART-prod.json.gz: the same list, the jobs' completions only;
production's alone in those of 2026-11-27-s).

The harness's table divides every row's production by the median of the isolated runs. Where
production's own speed moves between repetitions (a launch-bound job on a shared host ran 111 to
226 it/s alone within one call, 2026-11-27 call 69), that median hides whether a row lost speed or
met a slow repetition. This prints, for each row:
  - its production's requests (iterations) completed in the window over those of the isolated
    run of the same repetition (the repetitions are interleaved: the rows of one repetition run
    one after another), and their mean;
  - the same pooled over the repetitions by tenth of the on-phase (completions at each point of
    production's busy phase, folded over every whole on/off period of the window), against the
    isolated runs': a loss at production's return shows in the first tenths, a steady one in all;
  - the opportunistic job's iterations during production's whole on-phases over its isolated run's
    in as long, per repetition (the harness's `opp NT (prod on)` reads the on-phases' second halves
    only, so it misses what production's return costs the job).
Each mean comes with its standard error over the repetitions (± s / sqrt n, where n >= 2): a
repetition's production against its own isolated run spreads about 0.1 on the H100, so three
repetitions tell a mean to about ±0.06. Then each row's opportunistic mean over MPS-prio's (the
harvest target's ratio), with the error of a ratio of two independent means.
Several files of one part (lanes, calls) are pooled, each repetition paired within its own file.

Usage: python3 tools/bench/per_rep.py --window W --on ON --off OFF [--span A:B ...] RAW.json.gz [RAW.json.gz ...]
       python3 tools/bench/per_rep.py --extract OUT.json.gz RAW.json.gz  # the extract to keep
  e.g. python3 tools/bench/per_rep.py --window 9 --on 2 --off 1 \
         docs/bench-results/2026-11-27-s/call69-rinf32-prod.json.gz
"""
import argparse
import statistics

from experiment import read_raw, write_extract
from scenario_pair import paired_ratios

TENTHS = 10


def mean_error(values):
    """(mean, standard error of the mean) of the repetitions' values; the error None under two."""
    if not values:
        return None, None
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / len(values) ** 0.5 if len(values) >= 2 else None)


def ratio_error(numerator, denominator):
    """(ratio of the two means, its standard error) for independent repetitions (first order:
    the relative errors add in quadrature); None where either side has no mean or the
    denominator's is 0, the error None where either has no error."""
    a, ea = mean_error(numerator)
    b, eb = mean_error(denominator)
    if a is None or b is None or b == 0:
        return None
    if ea is None or eb is None:
        return a / b, None
    return a / b, ((ea / b) ** 2 + (a * eb / b ** 2) ** 2) ** 0.5


def with_error(mean, error):
    """A mean as a table cell: "0.931 ± 0.016", the error left out where unknown."""
    if mean is None:
        return "–"
    return f"{mean:.3f}" + (f" ± {error:.3f}" if error is not None else "")


def production_runs(path, job="prod"):
    """{row: {repetition: production's completion times}} of a raw file (`job` "opp": the
    opportunistic job's)."""
    rows = {}
    for run in read_raw(path):
        results = (run.get("results") or {}).get(job)
        if results and "completions" in results:
            rows.setdefault(run["config"], {})[run["rep"]] = results["completions"]
    return rows


def extract(path, out):
    """Writes both jobs' completions of every run in `path` to `out` (experiment.write_extract)."""
    write_extract(path, out, {"prod": ["completions"], "opp": ["completions"]})


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


def harvest_on(rows, window, on, off):
    """{row: [the opportunistic job's iterations completed during production's on-phases (whole
    on-phases, its first windows after production's return included) over what its isolated run
    of the same repetition completes in as long, per repetition with both]}. The harness's `opp NT
    (prod on)` reads the second half of the on-phase only (scenario_pair.reaction): it does not
    see what production's return costs the job."""
    return harvest_in(rows, window, on, off, 0.0, on)


def harvest_in(rows, window, on, off, start, end):
    """As harvest_on, over the span [start, end) seconds after each on-edge (e.g. 0 to 0.1: the
    job's first 0.1 s after production's return; on to on + off: while production idles)."""
    isolated = rows.get("isolated-opp", {})
    period = on + off
    span_time = sum(max(0.0, min(edge + end, window) - (edge + start)) for edge in _starts(window, period))
    out = {}
    for row, reps in rows.items():
        if row == "isolated-opp":
            continue
        ratios = []
        for rep, times in sorted(reps.items()):
            if rep not in isolated or not span_time:
                continue
            rate = len(in_window(isolated[rep], window)) / window
            got = sum(1 for t in in_window(times, window) if start <= t % period < end)
            if rate > 0:
                ratios.append(got / (rate * span_time))
        out[row] = ratios
    return out


def _starts(window, period):
    k, out = 0, []
    while k * period < window:
        out.append(k * period)
        k += 1
    return out


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
    ap.add_argument("--span", action="append", default=[], metavar="A:B",
                    help="also the opportunistic job over [A, B) seconds after each on-edge, e.g. 0:0.1 "
                         "(its first 0.1 s after production's return) or 1:2 (a 1 s off-phase); repeatable")
    ap.add_argument("--extract", metavar="OUT", help="write both jobs' completions to OUT instead (one raw file)")
    ap.add_argument("raw", nargs="+", help="S5-raw.json.gz files (or extracts) of one part: several are pooled, "
                    "each repetition paired within its own file")
    args = ap.parse_args(argv)
    if args.extract:
        if len(args.raw) != 1:
            ap.error("--extract takes one raw file")
        return extract(args.raw[0], args.extract)
    if None in (args.window, args.on, args.off):
        ap.error("--window, --on and --off are needed")
    try:
        spans = [tuple(float(x) for x in text.split(":")) for text in args.span]
    except ValueError:
        ap.error("--span takes A:B, seconds after the on-edge")
    if any(len(span) != 2 or not 0 <= span[0] < span[1] for span in spans):
        ap.error("--span takes A:B with 0 <= A < B")
    production, harvest, tenths, iso_tenths = {}, {}, {}, []
    in_spans = {span: {} for span in spans}
    for path in args.raw:
        rows = production_runs(path)
        isolated = rows.get("isolated-prod")
        if not isolated:
            raise SystemExit(f"{path}: no isolated-prod runs")
        iso_tenths += [by_tenth(t, args.window, args.on, args.off) for t in isolated.values()]
        for row, ratios in paired(rows, args.window).items():
            production.setdefault(row, []).extend(ratios)
            tenths.setdefault(row, []).extend(by_tenth(t, args.window, args.on, args.off) for t in rows[row].values())
        opportunistic = production_runs(path, "opp")
        for row, ratios in harvest_on(opportunistic, args.window, args.on, args.off).items():
            harvest.setdefault(row, []).extend(ratios)
        for span, by_row in in_spans.items():
            for row, ratios in harvest_in(opportunistic, args.window, args.on, args.off, *span).items():
                by_row.setdefault(row, []).extend(ratios)
    iso_mean = [sum(c) / len(iso_tenths) for c in zip(*iso_tenths)]
    print("| row | production per repetition, against its own isolated run | mean | by tenth of the "
          "on-phase, against the isolated runs | opportunistic during the on-phases, per repetition | mean |")
    print("|---|---|---|---|---|---|")
    for row, ratios in production.items():
        mean_tenths = [sum(c) / len(tenths[row]) for c in zip(*tenths[row])]
        profile = " ".join(f"{a / b:.2f}" if b else "–" for a, b in zip(mean_tenths, iso_mean))
        mean = with_error(*mean_error(ratios))
        opp = harvest.get(row, [])
        opp_mean = with_error(*mean_error(opp))
        print(f"| {row} | {' '.join(f'{r:.2f}' for r in ratios)} | {mean} | {profile} | "
              f"{' '.join(f'{r:.2f}' for r in opp) or '–'} | {opp_mean} |")
    reference = harvest.get("mps-prio")
    if reference:
        print()
        print("| row | opportunistic over MPS-prio's, during the on-phases |")
        print("|---|---|")
        for row, opp in harvest.items():
            if row == "mps-prio" or not opp:
                continue
            got = ratio_error(opp, reference)
            if got:
                print(f"| {row} | {got[0]:.2f}×" + (f" ± {got[1]:.2f}" if got[1] is not None else "") + " |")
    if spans:
        print()
        print("| row | " + " | ".join(f"opportunistic {a:g}–{b:g} s after the on-edge: median (mean)" for a, b in spans) + " |")
        print("|---|" + "---|" * len(spans))
        for row in harvest:
            cells = []
            for span in spans:
                v = in_spans[span].get(row, [])
                cells.append(f"{statistics.median(v):.3f} ({statistics.fmean(v):.3f})" if v else "–")
            print(f"| {row} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
