#!/usr/bin/env python3
"""A fresh daemon's first readings of beside's cost, against what the whole log says.

The concurrency budget reads beside's cost from pairs of adjacent periods (docs/policies.md, "The
concurrency budget"), and a reading taken high on a fresh daemon's first pairs can hold the
opportunistic job for a whole benchmark window (docs/benchmarks.md §5g, §5h). This replays the
tick logs of the archives given (PART-logs.tgz, as gpu_round.sh writes them), one daemon log at a
time, and sets each reading against two things the log shows:

  - the log's own cost of beside: the median, over every beside window with production in flight
    at least FULL of it and the opportunistic job launching (period_noise.windows), of its log
    speed (kernels completed per ms in flight) less the median of the paused windows within NEAR
    ticks of it (each window set against its neighbours, so that production's drift cancels), as
    1 - e^that; none with fewer than LEAST such windows;
  - production's window noise before the reading: the robust standard deviation of one window's
    log speed, from the differences of windows next to each other in one mode (1.4826 x their
    median absolute value / sqrt 2), over the NOISE_TICKS ticks up to the reading.

Default: the first reading that rests on two pairs (a clear cost, concurrency_budget.h
kClearCostSamples), one row each. --opp-start N: instead, production's beside windows in an
opportunistic job's first N windows with launches against the later ones, each against its
paused neighbours as above (is an opportunistic job's start-up costlier to production than its
steady work?).

Usage: python3 tools/bench/early_readings.py [--opp-start N] ARCHIVE.tgz ...
  e.g. python3 tools/bench/early_readings.py docs/bench-results/2026-1*/*-logs.tgz
"""
import argparse
import math
import statistics
import sys

from clear_readings import READING
from period_noise import windows
from tick_shares import daemon_logs, moded_ticks

FULL = 0.8         # a window counts where production was in flight this share of it
NEAR = 10          # paused windows within this many ticks are a beside window's reference
LEAST = 10         # beside windows that make the log's own cost
NOISE_TICKS = 40   # ticks before a reading whose windows give production's noise


def launches(text):
    """Per tick line: what its opportunistic jobs launched in the window."""
    return [sum(int(t[2]) for t in tick.opportunistic) for _, tick in moded_ticks(text)]


def beside_against_paused(seq):
    """(index, log speed less its paused neighbours' median) for each beside window of `seq`
    (period_noise.windows: (mode, log speed) per tick line, or None) with at least two paused
    neighbours within NEAR ticks."""
    out = []
    for i, w in enumerate(seq):
        if not w or w[0] != "beside":
            continue
        near = [v[1] for v in seq[max(0, i - NEAR):i + NEAR + 1] if v and v[0] == "paused"]
        if len(near) >= 2:
            out.append((i, w[1] - statistics.median(near)))
    return out


def own_cost(differences):
    """The log's cost of beside from beside_against_paused's differences; None if too few."""
    if len(differences) < LEAST:
        return None
    return 1 - math.exp(statistics.median(d for _, d in differences))


def window_noise(seq, end):
    """Production's window noise over the NOISE_TICKS ticks up to `end`; None with fewer than
    three steps."""
    steps = []
    for j in range(max(1, end - NOISE_TICKS), end + 1):
        a, b = seq[j - 1], seq[j]
        if a and b and a[0] == b[0]:
            steps.append(abs(b[1] - a[1]))
    if len(steps) < 3:
        return None
    return 1.4826 * statistics.median(steps) / math.sqrt(2)


def first_two_pair_reading(text):
    """(tick index, cost, error) of the log's first beside reading, if it rests on two pairs."""
    ticks = [line for line in text.splitlines() if " tick device=" in line]
    for i, line in enumerate(ticks):
        m = READING.search(line)
        if m:
            return (i, float(m.group(1)), float(m.group(2))) if int(m.group(3)) == 2 else None
    return None


def opp_start(seq, launched_per_tick, n):
    """beside_against_paused's differences split by whether the opportunistic jobs had launched
    in fewer than `n` windows before (`launched_per_tick`: launches()): (early, late)."""
    launched, before = 0, []
    for count in launched_per_tick:
        before.append(launched)
        if count > 0:
            launched += 1
    early, late = [], []
    for i, d in beside_against_paused(seq):
        (early if before[i] < n else late).append(d)
    return early, late


def summary(values):
    if not values:
        return "none"
    values = sorted(values)
    return "%d windows, median %+.3f, 10th percentile %+.3f" % (
        len(values), statistics.median(values), values[len(values) // 10])


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--opp-start", type=int)
    parser.add_argument("archives", nargs="+")
    args = parser.parse_args(argv)
    logs = [(path, name, text) for path in args.archives for name, text in daemon_logs(path)
            if "harvest" in name]
    if args.opp_start:
        early, late = [], []
        for _, _, text in logs:
            e, l = opp_start(windows(text, FULL), launches(text), args.opp_start)
            early += e
            late += l
        print("beside windows in the opportunistic job's first %d with launches: %s" %
              (args.opp_start, summary(early)))
        print("later beside windows: %s" % summary(late))
        return
    print("| archive | daemon log | first reading (2 pairs) | window noise before it | "
          "the log's own cost (beside windows) |")
    print("|---|---|---|---|---|")
    for path, name, text in logs:
        reading = first_two_pair_reading(text)
        if not reading:
            continue
        seq = windows(text, FULL)
        noise = window_noise(seq, min(reading[0], len(seq) - 1))
        differences = beside_against_paused(seq)
        cost = own_cost(differences)
        print("| %s | %s | %.3f ± %.3f | %s | %s (%d) |" % (
            "/".join(path.split("/")[-2:]), name, reading[1], reading[2],
            "%.3f" % noise if noise is not None else "?",
            "%.3f" % cost if cost is not None else "?", len(differences)))


if __name__ == "__main__":
    main(sys.argv[1:])
