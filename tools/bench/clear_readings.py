#!/usr/bin/env python3
"""How often a fresh daemon's early reading of beside's cost is clearly within the target, and how
often such a reading was wrong (policies/src/concurrency_budget.h, clearly_fits).

For each daemon log (gpushared-*harvest*.log or *budget*.log) in each archive given (default:
every docs/bench-results/*/*logs.tgz), the budget's readings of beside's cost are taken from its
trace lines ("beside=COST±ERROR(PAIRS)/..."). Where the reading came to rest on 8 pairs or more,
its cost is the larger of the median of those readings and the last one; the log is "cheap" where
that is within the allowance (0.05 / 0.95: the target's 5 % over all the time but the reference
share), "costly" otherwise. For each margin k and least pair count n, the table counts the logs
whose first reading on n to 7 pairs had COST + k x ERROR within the allowance ("clear"): cheap
logs clear early (harvest gained) and costly logs clear early (the misreadings such a rule would
trust), with the costly ones' resting costs.
Usage: python3 tools/bench/clear_readings.py [archive.tgz ...]   (prints a markdown table)
"""
import glob
import re
import statistics
import sys
import tarfile

READING = re.compile(r"beside=(-?[\d.]+)±([\d.]+)\((\d+)\)/")
ALLOWED = 0.05 / 0.95
RESTED = 8


def readings(text):
    """The log's beside readings, (cost, error, pairs), consecutive repeats dropped."""
    out = []
    for line in text.splitlines():
        if " budget " not in line:
            continue
        m = READING.search(line)
        if m:
            r = (float(m[1]), float(m[2]), int(m[3]))
            if not out or out[-1] != r:
                out.append(r)
    return out


def resting_cost(seq):
    """The cost a log's reading came to rest on (RESTED pairs or more): the larger of the median
    of those readings and the last; None where it never did."""
    late = [r for r in seq if r[2] >= RESTED]
    return max(statistics.median(r[0] for r in late), late[-1][0]) if late else None


def clear_early(seq, margin, least_pairs):
    """Whether a reading on least_pairs to RESTED - 1 pairs fitted the allowance taken `margin`
    errors high."""
    return any(least_pairs <= r[2] < RESTED and r[0] + margin * r[1] <= ALLOWED for r in seq)


def logs(archives):
    for archive in archives:
        try:
            tar = tarfile.open(archive)
        except (OSError, tarfile.TarError):
            continue
        for member in tar.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            if not (name.startswith("gpushared-") and name.endswith(".log")):
                continue
            if "harvest" not in name and "budget" not in name:
                continue
            seq = readings(tar.extractfile(member).read().decode(errors="replace"))
            if seq:
                yield archive, name, seq


def main(argv):
    archives = argv or sorted(glob.glob("docs/bench-results/*/*logs.tgz"))
    rested = [(seq, resting_cost(seq)) for _, _, seq in logs(archives)]
    rested = [(seq, cost) for seq, cost in rested if cost is not None]
    cheap = sum(1 for _, cost in rested if cost <= ALLOWED)
    print(f"{len(rested)} daemon logs whose reading rested on {RESTED}+ pairs: {cheap} cheap, "
          f"{len(rested) - cheap} costly (allowance {ALLOWED:.4f})\n")
    print("| margin k | least pairs n | cheap clear early | costly clear early | their resting costs |")
    print("|---|---|---|---|---|")
    for k in (1, 1.5, 2, 3):
        for n_min in (3, 4, 5):
            good = bad = 0
            costs = []
            for seq, cost in rested:
                if not clear_early(seq, k, n_min):
                    continue
                if cost <= ALLOWED:
                    good += 1
                else:
                    bad += 1
                    costs.append(cost)
            listed = " ".join(f"{c:.3f}" for c in sorted(costs))
            print(f"| {k} | {n_min} | {good} / {cheap} | {bad} / {len(rested) - cheap} | {listed} |")


if __name__ == "__main__":
    main(sys.argv[1:])
