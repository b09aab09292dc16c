#!/usr/bin/env python3
"""S2's latency tail pooled over repetitions, lanes and calls, from the harness's raw files
(S2-raw.json.gz, run.py).

The harness's S2 table gives each row's median over its repetitions of a per-repetition p99. With
three repetitions of a 4 s window at load 0.3 (about 600 requests each), one repetition's p99
rests on its six slowest requests: on the H100 (2026-11-27, call 71) one row's p99 ranged 13.7 to
48.7 ms over three repetitions. Every configuration of one (load, repetition) meets the same
Poisson arrivals (scenario_pair.run_s2), so this prints, for each load and row:
  - its requests' p50 and p99 pooled over every repetition of every file given, and the p99 over
    the isolated rows' pooled p99;
  - the median over repetitions of its p99 over the isolated run's p99 with the same arrivals
    (files are kept apart: a repetition of one file is paired only with the same file's);
  - the opportunistic job's throughput over the isolated opportunistic run's (median of the
    repetitions, each against its own repetition's);
  - the share of the window the server spent serving requests (median of the repetitions;
    serving_share): its real utilisation, which the nominal load (set against the closed-loop
    capacity) understates. On the H100 (2026-11-28, calls 90-91) it was 0.33-0.56 at nominal 0.3
    and 0.47-0.78 at 0.5, about what the daemon's paused windows read in flight
    (docs/benchmarks.md §5b).
--from S: only the requests that arrived at least S seconds into their window (completion less
latency). In the harness both jobs idle between windows; on the H100 (2026-11-27, calls 77-78)
the p99 of every row that shares the GPU came from requests arriving 0.5-1.5 s into the window,
when the resumed training job ran up to twice its later rate (docs/benchmarks.md §4y).

Usage: python3 tools/bench/s2_tail.py [--window 4] [--from S] RAW.json.gz [RAW.json.gz ...]
       python3 tools/bench/s2_tail.py --extract OUT.json.gz RAW.json.gz  # the extract to keep
"""
import argparse
import statistics

from experiment import percentile, read_raw, throughput, write_extract

ISOLATED = "isolated-prod"


def serving_share(latencies, completions, window):
    """The share of `window` seconds a server that serves one request at a time spent serving:
    each request from its arrival (completion less latency) or the previous completion, whichever
    is later, to its completion. None without completion times."""
    if not completions or len(completions) != len(latencies):
        return None
    serving, previous = 0.0, float("-inf")
    for done, latency in sorted(zip(completions, latencies)):
        serving += max(0.0, done - max(done - latency, previous))
        previous = done
    return serving / window


def runs(path, window, since=0.0):
    """{(row, load): {repetition: (latencies in ms, opportunistic iterations or None, serving
    share or None)}}, and the
    isolated opportunistic run's iterations by repetition, from one raw file; iterations are
    counted in the window as the harness counts them (experiment.throughput). `since`: only the
    requests that arrived that many seconds into the window or later."""
    rows, iso_opp = {}, {}
    for run in read_raw(path):
        results = run.get("results") or {}
        name = run["config"]
        if name == "isolated-opp":
            if "opp" in results:
                iso_opp[run["rep"]] = throughput(results["opp"], window, window)
            continue
        if "@" not in name or "prod" not in results:
            continue
        row, load = name.rsplit("@", 1)
        prod = results["prod"]
        latencies = prod.get("latencies", [])
        if since > 0:
            latencies = [x for x, done in zip(latencies, prod.get("completions", [])) if done - x >= since]
        lat = [x * 1000 for x in latencies]
        opp = throughput(results["opp"], window, window) if "opp" in results else None
        serving = serving_share(prod.get("latencies", []), prod.get("completions", []), window)
        rows.setdefault((row, float(load)), {})[run["rep"]] = (lat, opp, serving)
    return rows, iso_opp


def table(paths, window=4.0, since=0.0):
    """The rows of the printed table: dicts with row, load, n, p50, p99, p99_x (pooled p99 over
    the isolated rows'), p99_paired (median per-repetition ratio), opp_nt (median), serving
    (median serving_share)."""
    pooled = {}    # (row, load) -> every latency
    paired = {}    # (row, load) -> per-repetition p99 ratios
    opp_nt = {}    # (row, load) -> per-repetition opportunistic NT
    serving = {}   # (row, load) -> per-repetition serving share
    for path in paths:
        rows, iso_opp = runs(path, window, since)
        for (row, load), reps in rows.items():
            iso = rows.get((ISOLATED, load), {})
            for rep, (lat, opp, busy) in reps.items():
                pooled.setdefault((row, load), []).extend(lat)
                if busy is not None:
                    serving.setdefault((row, load), []).append(busy)
                if lat and rep in iso and iso[rep][0]:
                    paired.setdefault((row, load), []).append(
                        percentile(lat, 99) / percentile(iso[rep][0], 99))
                if opp is not None and iso_opp.get(rep):
                    opp_nt.setdefault((row, load), []).append(opp / iso_opp[rep])
    out = []
    for (row, load), lat in sorted(pooled.items(), key=lambda kv: (kv[0][1], kv[0][0] != ISOLATED, kv[0][0])):
        if not lat:
            continue
        iso = pooled.get((ISOLATED, load))
        p99 = percentile(lat, 99)
        out.append({"row": row, "load": load, "n": len(lat), "p50": percentile(lat, 50), "p99": p99,
                    "p99_x": p99 / percentile(iso, 99) if iso else None,
                    "p99_paired": statistics.median(paired[(row, load)]) if paired.get((row, load)) else None,
                    "reps": len(paired.get((row, load), [])),
                    "opp_nt": statistics.median(opp_nt[(row, load)]) if opp_nt.get((row, load)) else None,
                    "serving": statistics.median(serving[(row, load)]) if serving.get((row, load)) else None})
    return out


def extract(path, out):
    """Writes what this tool reads of `path` to `out`: production's latencies and completion times
    and the opportunistic job's completion times of every run, to 10 us (docs/bench-results keeps
    these)."""
    write_extract(path, out, {"prod": ["latencies", "completions"], "opp": ["completions"]})


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", nargs="+", help="S2-raw.json.gz files (one per lane or call)")
    ap.add_argument("--window", type=float, default=4.0, help="the runs' window in seconds (gpu_round.sh's S2: 4)")
    ap.add_argument("--from", dest="since", type=float, default=0.0, metavar="S",
                    help="only requests arriving at least S seconds into their window")
    ap.add_argument("--extract", metavar="OUT", help="write the extract of the one raw file given to OUT and stop")
    args = ap.parse_args()
    if args.extract:
        if len(args.raw) != 1:
            ap.error("--extract takes one raw file")
        extract(args.raw[0], args.extract)
        return
    print("| load | row | requests | p50 ms | p99 ms | p99 × isolated (pooled) | p99 × isolated (paired, median) | reps | opp NT | serving |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in table(args.raw, args.window, args.since):
        print(f"| {r['load']} | {r['row']} | {r['n']} | {r['p50']:.2f} | {r['p99']:.2f} | {fmt(r['p99_x'], '.2f')}"
              f" | {fmt(r['p99_paired'], '.2f')} | {r['reps']} | {fmt(r['opp_nt'], '.3f')} | {fmt(r['serving'], '.2f')} |")


if __name__ == "__main__":
    main()
