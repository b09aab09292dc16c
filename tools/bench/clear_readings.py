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

--doubt-band: instead, the logs with a reading on 3 pairs or more that got the benefit of the
doubt (concurrency_budget.h given_the_doubt, with the whole allowance: taken one error low within
it, cost and error each within twice it) at a cost above 1.5 times the allowance: what a cap of
1.5 times instead of 2 would have held, cheap and costly logs apart.
Usage: python3 tools/bench/clear_readings.py [--doubt-band] [archive.tgz ...]   (prints a markdown table)
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


def in_doubt_band(seq, low=1.5, high=2):
    """Whether a reading on 3 pairs or more was given the doubt at a cost above `low` times the
    allowance (and, as the doubt asks, cost and error within `high` times it)."""
    return any(r[2] >= 3 and r[0] - r[1] <= ALLOWED and low * ALLOWED < r[0] <= high * ALLOWED
               and r[1] <= high * ALLOWED for r in seq)


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
    band = "--doubt-band" in argv
    argv = [a for a in argv if a != "--doubt-band"]
    archives = argv or sorted(glob.glob("docs/bench-results/*/*logs.tgz"))
    rested = [(seq, resting_cost(seq)) for _, _, seq in logs(archives)]
    rested = [(seq, cost) for seq, cost in rested if cost is not None]
    cheap = sum(1 for _, cost in rested if cost <= ALLOWED)
    print(f"{len(rested)} daemon logs whose reading rested on {RESTED}+ pairs: {cheap} cheap, "
          f"{len(rested) - cheap} costly (allowance {ALLOWED:.4f})\n")
    if band:
        held = [cost for seq, cost in rested if in_doubt_band(seq)]
        costly = sorted(c for c in held if c > ALLOWED)
        print("| given the doubt above 1.5x the allowance | cheap logs | costly logs | their resting costs |")
        print("|---|---|---|---|")
        print(f"| on 3+ pairs | {len(held) - len(costly)} / {cheap} | {len(costly)} / "
              f"{len(rested) - cheap} | {' '.join(f'{c:.3f}' for c in costly)} |")
        return
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
