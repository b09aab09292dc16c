#!/usr/bin/env python3
"""How a budget period's length changes the noise of the cost it reads, from gpushared trace logs.

The concurrency budget sets each period against the one just before it (docs/policies.md, "The
concurrency budget"): the log of production's speed (kernels completed per ms in flight) over a
period's measured windows, less the previous period's. Whether a period of fewer windows reads
as well is a question of where production's noise lives: per window (it averages down over a
period's windows) or per period (it does not). This replays the tick logs of the archives given
(PART-logs.tgz, as gpu_round.sh writes them): for each pair of adjacent runs of paused and beside
windows (production in flight at least 90 % of every window, the run's first window left out as
the budget does), the difference "beside less paused" taken over k measured windows on each side
of the boundary, for k = 1, 2 and 3. Printed per archive and k: pairs, mean (the effect: cost =
1 - e^mean) and standard deviation (the noise of one pair).

A window's mode is the gate the previous tick line gave (a tick line reports the window that just
ended and the gate for the next one).

--min-in-flight F: a window counts where production was in flight at least F of it (default 0.9).
A launch-bound job that pauses on the CPU each step is in flight about two thirds of each window
(§4t): with the default none of its windows count, with 0 all do.
--per-log: a line per daemon log (one fresh daemon per repetition), not per archive.
--paced: production's kernels per ms of the in-flight time its completions took (the relay's
`/Nus-paced`, from one completion to the next across windows) instead of per ms in flight in the
window; windows without it (no completions, or a daemon that does not log it) do not count.
--throughput: production's kernels per window of its busy time instead of per ms in flight (the
budget's `throughput_cost`): a launch-bound job with CPU work between its kernels can lose steps
beside with no loss of speed in flight (§4t).

--triplets JUMP: instead, each beside run between two paused runs, and whether the paused speed
moved by more than JUMP (in log) between them: where it did, the beside run's two readings (against
the paused run before and after) disagree by about that much, and a pair cannot tell the move from
a cost (a launch-bound server's speed jumps between levels for seconds, docs/benchmarks.md §4w).

Usage: python3 tools/bench/period_noise.py [--min-in-flight F] [--per-log] [--throughput | --paced] ARCHIVE.tgz ...
       python3 tools/bench/period_noise.py --triplets 0.2 ARCHIVE.tgz ...
  e.g. python3 tools/bench/period_noise.py docs/bench-results/2026-11-26-m/call4*-s5g1-logs.tgz
       python3 tools/bench/period_noise.py --min-in-flight 0 --per-log \
         docs/bench-results/2026-11-27-p/call58-mb16p10-tt32-logs.tgz
"""
import argparse
import math
import os
import statistics
import sys

from tick_shares import completions, daemon_logs, moded_ticks, paced, window_text

MEASURED = (1, 2, 3)
FULL = 0.9  # production in flight at least this share of the window


def share(text):
    """An argparse type: a share of a window, within 0 and 1 (--min-in-flight)."""
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a share within 0 and 1, got {text}")
    return value


def windows(text, min_in_flight=FULL, throughput=False, by_pace=False):
    """(mode, log speed) per tick line with one production and one opportunistic job; None where
    production was in flight less than `min_in_flight` of the window, where a beside window's
    opportunistic job launched nothing (it was not running beside: the budget measures only
    windows where an opportunistic job wants to run, and S5's production controls run with it
    idle), or a line says nothing. `by_pace`: the speed over the in-flight time the window's
    completions took (--paced); None where the line has none."""
    out = []
    for previous, tick in moded_ticks(text):
        entry = None
        speed = completions(tick.production[0]) if len(tick.production) == 1 else None
        idle_beside = previous == "beside" and all(int(t[2]) == 0 for t in tick.opportunistic)
        if previous and tick.opportunistic and tick.window_us and speed and not idle_beside:
            done, in_flight_us = speed
            if done > 0 and in_flight_us > 0 and in_flight_us >= min_in_flight * tick.window_us:
                per_us = tick.window_us if throughput else in_flight_us
                if by_pace:
                    per_us = paced(tick.production[0])
                entry = (previous, math.log(done / (per_us / 1000))) if per_us else None
        out.append(entry)
    return out


def runs(entries):
    """Runs of consecutive windows of one mode; None between runs that something broke apart."""
    result, current = [], None
    for entry in entries + [None]:
        if entry is None:
            if current:
                result.append(current)
            if result and result[-1] is not None:
                result.append(None)
            current = None
        elif current and current[0] == entry[0]:
            current[1].append(entry[1])
        else:
            if current:
                result.append(current)
            current = (entry[0], [entry[1]])
    return result


def differences(entries, k):
    """Beside less paused over k measured windows either side of each paused-beside boundary."""
    out = []
    series = runs(entries)
    for a, b in zip(series, series[1:]):
        if a is None or b is None or {a[0], b[0]} != {"paused", "beside"}:
            continue
        before, after = a[1][1:][-k:], b[1][1:][:k]  # the first window of a run is not measured
        if len(before) < k or len(after) < k:
            continue
        d = statistics.fmean(after) - statistics.fmean(before)
        out.append(d if b[0] == "beside" else -d)
    return out


def triplets(entries):
    """Each beside run between two paused runs (nothing breaking them apart), each run's first
    window left out: (how far the paused speed moved between the two, |mean log after - mean log
    before|; beside less the paused run before, in mean log speed; beside less the one after)."""
    out = []
    series = runs(entries)
    for a, b, c in zip(series, series[1:], series[2:]):
        if None in (a, b, c) or (a[0], b[0], c[0]) != ("paused", "beside", "paused"):
            continue
        before, beside, after = a[1][1:], b[1][1:], c[1][1:]
        if before and beside and after:
            out.append((abs(statistics.fmean(after) - statistics.fmean(before)),
                        statistics.fmean(beside) - statistics.fmean(before),
                        statistics.fmean(beside) - statistics.fmean(after)))
    return out


def print_triplets(archives, min_in_flight, throughput, jump):
    """--triplets: per archive, how often the paused reference moved by more than `jump` around a
    beside run, and how far the two readings of that run (against either paused side) then
    differ, against the runs where it did not."""
    print(f"| archive | paused-beside-paused runs | paused moved > {jump} | readings' difference there "
          "(median, log) | elsewhere |")
    print("|---|---|---|---|---|")
    for path in archives:
        found = [t for _, text in daemon_logs(path)
                 for t in triplets(windows(window_text(text), min_in_flight, throughput))]
        moved = [abs(t[1] - t[2]) for t in found if t[0] > jump]
        still = [abs(t[1] - t[2]) for t in found if t[0] <= jump]

        def median(values):
            return f"{statistics.median(values):.2f}" if values else "–"
        print(f"| {os.path.basename(path)} | {len(found)} | {len(moved)} | {median(moved)} | {median(still)} |")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--min-in-flight", type=share, default=FULL)
    parser.add_argument("--per-log", action="store_true")
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument("--throughput", action="store_true")
    speed.add_argument("--paced", action="store_true")
    parser.add_argument("--triplets", type=float, metavar="JUMP",
                        help="instead: beside runs between paused ones, where the paused speed moved by "
                             "more than JUMP in log (each log's benchmark window only)")
    parser.add_argument("archives", nargs="+")
    args = parser.parse_args(argv)
    if args.triplets is not None:
        print_triplets(args.archives, args.min_in_flight, args.throughput, args.triplets)
        return 0
    print("| archive | measured windows per period | pairs | mean (beside less paused) | sd |")
    print("|---|---|---|---|---|")
    for path in args.archives:
        groups = {}  # printed name -> k -> differences
        for name, text in daemon_logs(path):
            entries = windows(text, args.min_in_flight, args.throughput, args.paced)
            group = groups.setdefault(f"{os.path.basename(path)} {name}" if args.per_log
                                      else os.path.basename(path), {k: [] for k in MEASURED})
            for k in MEASURED:
                group[k] += differences(entries, k)
        for label, pooled in groups.items():
            for k in MEASURED:
                d = pooled[k]
                sd = f"{statistics.stdev(d):.3f}" if len(d) > 1 else "–"
                mean = f"{statistics.fmean(d):+.3f}" if d else "–"
                print(f"| {label} | {k} | {len(d)} | {mean} | {sd} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
