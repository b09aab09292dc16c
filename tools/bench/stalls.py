#!/usr/bin/env python3
"""Stalls in a production job's speed, from gpushared trace logs, and what the budget's robust
reading (the harvest setting `robust_costs`, docs/policies.md "Robust costs") makes of them.

The concurrency budget reads a mode's cost from pairs of adjacent periods (period_noise.py). A
window in which production ran far slower than the windows around it, whatever the mode, weighs
in such a pair as a large cost. This replays the tick logs of the archives given (PART-logs.tgz,
as gpu_round.sh writes them) three ways, each printed as a markdown table:

1. stalls by mode: each measured window (production in flight at least --min-in-flight of it)
   that follows at least 3 of the same mode in one run, set against the mean log speed of those
   3: the share of windows below 0.6 of it (a stall), per mode. Stalls in paused windows are not
   a cost of any mode.
2. the first beside windows after paused ones, set against the mean of the last (up to 3) paused
   windows before them, by how long the opportunistic job had been paused (at least --long
   windows, or fewer): a cost of resuming it would show as a difference after long pauses only.
3. the cost each daemon log's pairs of periods read (period_noise.differences, 2 windows a side,
   every window counted), over its first 6 pairs and over all: as the mean of the differences
   clipped to 1 (the budget without robust_costs) and winsorized as robust_costs does (from 5
   differences on, at most 3 robust standard deviations from their median). Printed per archive
   as the median and the range over its logs.

Usage: python3 tools/bench/stalls.py [--min-in-flight F] [--long N] ARCHIVE.tgz ...
  e.g. python3 tools/bench/stalls.py docs/bench-results/2026-11-27-q/call62-s5g1-a-logs.tgz
"""
import argparse
import math
import os
import statistics
import sys

from period_noise import differences, share, windows
from tick_shares import daemon_logs

STALL = math.log(0.6)   # a window below 0.6 of its reference
BEFORE = 3              # windows a reference is the mean of
RESUMED = 3             # beside windows read after each change from paused
FIRST_PAIRS = 6         # a fresh daemon's early reading
# The budget's rules (policies/src/concurrency_budget.h): kMaxDifference, kRobustSamples,
# kRobustSpread, kRobustFloor.
CLIP, ROBUST_SAMPLES, ROBUST_SPREAD, ROBUST_FLOOR = 1.0, 5, 3.0, 0.02


def stalls_by_mode(entries):
    """mode -> (windows, stalls): each window after BEFORE of its mode in one run."""
    counts = {}
    run = []
    for entry in entries:
        if entry is None or (run and run[-1][0] != entry[0]):
            run = []
        if entry is None:
            continue
        if len(run) >= BEFORE:
            reference = statistics.fmean(speed for _, speed in run[-BEFORE:])
            n, stalled = counts.get(entry[0], (0, 0))
            counts[entry[0]] = (n + 1, stalled + (entry[1] - reference < STALL))
        run.append(entry)
    return counts


def resumed(entries, long_pause):
    """(long or short, k) -> differences of the k-th beside window after paused ones (k from 0)
    from the mean of the last BEFORE paused windows."""
    out = {}
    for i in range(1, len(entries)):
        now, before = entries[i], entries[i - 1]
        if not now or not before or now[0] != "beside" or before[0] != "paused":
            continue
        j = i - 1
        while j >= 0 and entries[j] and entries[j][0] == "paused":
            j -= 1
        held = i - 1 - j
        reference = statistics.fmean(e[1] for e in entries[max(j + 1, i - BEFORE):i])
        kind = "long" if held >= long_pause else "short"
        for k in range(RESUMED):
            after = entries[i + k] if i + k < len(entries) else None
            if not after or after[0] != "beside":
                break
            out.setdefault((kind, k), []).append(after[1] - reference)
    return out


def winsorized(values):
    """The differences as robust_costs fits them: clipped, then from ROBUST_SAMPLES on within
    ROBUST_SPREAD robust standard deviations of their median."""
    clipped = [max(-CLIP, min(CLIP, v)) for v in values]
    if len(clipped) < ROBUST_SAMPLES:
        return clipped
    middle = statistics.median(clipped)
    mad = statistics.median(abs(v - middle) for v in clipped)
    spread = ROBUST_SPREAD * max(ROBUST_FLOOR, 1.4826 * mad)
    return [max(middle - spread, min(middle + spread, v)) for v in clipped]


def cost(values, robust):
    """1 - e^(the mean difference): the cost a pair of modes' differences read."""
    fitted = winsorized(values) if robust else [max(-CLIP, min(CLIP, v)) for v in values]
    return 1 - math.exp(statistics.fmean(fitted))


def cell(values):
    if not values:
        return "–"
    return f"{statistics.median(values):+.3f} [{min(values):+.3f}, {max(values):+.3f}]"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--min-in-flight", type=share, default=0.9)
    parser.add_argument("--long", type=int, default=6)
    parser.add_argument("archives", nargs="+")
    args = parser.parse_args(argv)
    if args.long < 1:
        parser.error(f"--long must be at least 1 window, got {args.long}")
    by_mode, after_pause, readings = [], [], []
    for path in args.archives:
        name = os.path.basename(path)
        modes, changes = {}, {}
        costs = {"first": ([], []), "all": ([], [])}
        logs = 0
        for log_name, text in daemon_logs(path):
            entries = windows(text, args.min_in_flight)
            if not any(entries):
                continue
            logs += 1
            for mode, (n, stalled) in stalls_by_mode(entries).items():
                total = modes.get(mode, (0, 0))
                modes[mode] = (total[0] + n, total[1] + stalled)
            for key, values in resumed(entries, args.long).items():
                changes.setdefault(key, []).extend(values)
            pairs = differences(windows(text, 0.0), 2)
            if len(pairs) >= ROBUST_SAMPLES - 1:
                for label, chosen in (("first", pairs[:FIRST_PAIRS]), ("all", pairs)):
                    costs[label][0].append(cost(chosen, False))
                    costs[label][1].append(cost(chosen, True))
        for mode in sorted(modes):
            n, stalled = modes[mode]
            by_mode.append(f"| {name} | {mode} | {n} | {stalled / n:.3f} |")
        for (kind, k) in sorted(changes):
            values = changes[(kind, k)]
            below = sum(v < STALL for v in values) / len(values)
            after_pause.append(f"| {name} | {kind} | {k + 1} | {len(values)} | "
                               f"{statistics.median(values):+.3f} | {below:.3f} |")
        for label in ("first", "all"):
            plain, robust = costs[label]
            readings.append(f"| {name} | {label} | {len(plain)} of {logs} | {cell(plain)} | {cell(robust)} |")
    print("| archive | mode | windows after 3 of their mode | share below 0.6 of those 3 |")
    print("|---|---|---|---|")
    print("\n".join(by_mode))
    print(f"\n| archive | paused before (long: ≥ {args.long} windows) | beside window | n | "
          "median (log speed less the paused windows') | share below 0.6 |")
    print("|---|---|---|---|---|---|")
    print("\n".join(after_pause))
    print(f"\n| archive | pairs ({FIRST_PAIRS} first or all) | logs with {ROBUST_SAMPLES - 1}+ pairs | "
          "beside's cost, mean clipped to 1: median [range] | robust_costs' winsorized mean |")
    print("|---|---|---|---|---|")
    print("\n".join(readings))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
