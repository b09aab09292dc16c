#!/usr/bin/env python3
"""How long a production job takes to reach its steady speed, from gpushared trace logs.

The concurrency budget does not measure a production job's first `warm_up_ms` (750) of windows
with progress (docs/policies.md, "Warm-up"): start-up speeds would read as costs. This replays the
tick logs of the archives given (PART-logs.tgz, as gpu_round.sh writes them), one daemon log at a
time (one production job): its speed in each window with completions (kernels completed per ms in
flight), its steady speed (the median of the second half of those windows), and the windows with
progress before the first run of RUN windows in a row at STEADY of that speed or more. Printed per
archive: those counts, sorted, and how many exceed the warm-up's windows.

Usage: python3 tools/bench/start_up.py [--warm-up-windows 15] ARCHIVE.tgz ...
"""
import argparse
import os
import statistics
import sys

from tick_shares import completions, daemon_logs, ticks

RUN = 5
STEADY = 0.7
LEAST_WINDOWS = 40  # a log with fewer windows with progress says nothing of a steady speed


def speeds(text):
    """The production job's kernels per ms in flight, per window with completions, in order."""
    out = []
    for tick in ticks(text):
        speed = completions(tick.production[0]) if len(tick.production) == 1 else None
        if speed and speed[0] > 0 and speed[1] > 0:
            out.append(speed[0] / (speed[1] / 1000))
    return out


def windows_to_steady(values):
    """Windows before the first RUN in a row at STEADY of the steady speed; None if never."""
    if len(values) < LEAST_WINDOWS:
        return None
    steady = statistics.median(values[len(values) // 2:])
    for i in range(len(values) - RUN + 1):
        if all(v >= STEADY * steady for v in values[i:i + RUN]):
            return i
    return None


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--warm-up-windows", type=int, default=15)
    parser.add_argument("archives", nargs="+")
    args = parser.parse_args(argv)
    for path in args.archives:
        counts = []
        for _, text in daemon_logs(path):
            counts.append(windows_to_steady(speeds(text)))
        known = sorted(c for c in counts if c is not None)
        beyond = sum(1 for c in known if c > args.warm_up_windows)
        print(f"{os.path.basename(path)}: windows to steady {known} (unknown: "
              f"{len(counts) - len(known)}); beyond {args.warm_up_windows}: {beyond} of {len(known)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
