#!/usr/bin/env python3
"""How much of a paused period's settling window the opportunistic jobs' queue takes to drain.

The concurrency budget does not measure the first window of a paused period after beside (it
settles: the opportunistic jobs' queued kernels, up to loop_queue_ms or queue_ms of their work,
still run there beside production; docs/policies.md "The concurrency budget"). Whether that
window is enough, and how much of it the drain takes, shows in production's speed (kernels
completed per ms in flight, period_noise.windows) around each such change in the tick logs of the
archives given (PART-logs.tgz, as gpu_round.sh writes them):

  B  the mean log speed of the last two beside windows before the paused run (the opportunistic
     job launching in the last), S the settling window, M the first measured paused window.

Per part and row (the daemon's policy, repetitions together): how many such changes, the medians
of S - B, M - B and M - S, and where beside costs production enough to tell (median M - B of at
least MIN_COST in log speed) the drain as a time, window x median(M - S) / median(M - B): the
part of the settling window production still ran at its beside speed, were the drain a clean
step. A drain longer than the window would leave M below the paused speed and make beside read
cheaper than it is; a drain within it leaves M - B the cost.

Usage: python3 tools/bench/settle_drain.py ARCHIVE.tgz ...
  e.g. python3 tools/bench/settle_drain.py docs/bench-results/2026-11-28-d/call99-s5s1-logs.tgz
"""
import os
import re
import statistics
import sys

from early_readings import launches
from period_noise import FULL, windows
from tick_shares import daemon_logs

MIN_COST = 0.1    # median M - B (log speed) from which the drain is told as a time
WINDOW_MS = 50    # the daemon's tick


def changes(seq, launched):
    """(B, S, M) for each paused run after beside in `seq` (period_noise.windows: (mode, log
    speed) per tick line, or None), `launched` the opportunistic launches per line: two beside
    windows, the last with launches, then two paused ones, each with a speed."""
    out = []
    for i in range(2, len(seq) - 1):
        window = seq[i - 2:i + 2]
        if any(w is None for w in window) or launched[i - 1] == 0:
            continue
        if [w[0] for w in window] != ["beside", "beside", "paused", "paused"]:
            continue
        out.append(((window[0][1] + window[1][1]) / 2, window[2][1], window[3][1]))
    return out


def summary(found):
    """(n, median S - B, median M - B, median M - S, drain ms or None) of (B, S, M) triples."""
    if not found:
        return None
    s_b = statistics.median(s - b for b, s, _ in found)
    m_b = statistics.median(m - b for b, _, m in found)
    m_s = statistics.median(m - s for _, s, m in found)
    drain = WINDOW_MS * max(0.0, m_s) / m_b if m_b >= MIN_COST else None
    return len(found), s_b, m_b, m_s, drain


def row_name(log_name):
    """A daemon log's row: its policy, without the repetition."""
    return re.sub(r"-rep\d+(?=\.log$)", "", log_name)[len("gpushared-"):-len(".log")]


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    rows = {}
    for path in argv:
        part = os.path.basename(path).replace("-logs.tgz", "")
        for name, text in daemon_logs(path):
            if "harvest" not in name:
                continue
            seq = windows(text, FULL)
            rows.setdefault((part, row_name(name)), []).extend(changes(seq, launches(text)))
    print("| part | row | changes | S - B | M - B | M - S | drain (ms) |")
    print("|---|---|---|---|---|---|---|")
    for (part, row), found in sorted(rows.items()):
        got = summary(found)
        if not got:
            continue
        n, s_b, m_b, m_s, drain = got
        print("| %s | %s | %d | %+.3f | %+.3f | %+.3f | %s |" % (
            part, row, n, s_b, m_b, m_s, "%.0f" % drain if drain is not None else "–"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
