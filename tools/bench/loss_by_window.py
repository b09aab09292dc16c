#!/usr/bin/env python3
"""Where production's loss went, by kind of window, from gpushared trace logs.

The concurrency budget plans each mode's share of production's busy time from the cost it
measures in that mode's windows (docs/policies.md, "The concurrency budget"); some windows it does
not measure. This replays the tick logs of the archives given (PART-logs.tgz, as gpu_round.sh
writes them) and charges every busy window of production its shortfall against production's
speed alone: the median kernels completed in a *steady paused* window (paused, after a paused
window, production busy through both). A window's shortfall is its in-flight share less its
kernels over that median, so a window half-busy at full speed loses nothing. Kinds:
  - return: production's first busy window after an idle one, where the opportunistic job was
    idle-gated (held at production's first launch until the tick);
  - return-beside: the same where it was not held (the period production came back to ran beside
    at a cost within the target: docs/policies.md, "Schedule");
  - beside-first / beside: the first window of a beside run (its settling window: measured by
    no one) and the others;
  - drain: a paused or gated window right after beside (the opportunistic queue drains in it);
  - paused / gated: the others. Paused windows lose against their own median by their spread
    alone (a left tail of slow windows), which is production's own noise, not sharing's.
Printed per daemon log and pooled per gpushare row of each archive: busy windows, the loss as a share of them, and per
kind its windows and its loss as a share of all busy windows. A window's mode is the gate the
previous tick line gave.

Only the benchmark's window is read (tick_shares.window_text: without the harness's warm-up
before it and without a production control's window; --after-idle, default 100, is the idle
stretch that parts them).

Usage: python3 tools/bench/loss_by_window.py [--after-idle N] ARCHIVE.tgz ...
  e.g. python3 tools/bench/loss_by_window.py docs/bench-results/2026-11-27-s/call69-rinf32-logs.tgz
"""
import argparse
import os
import re
import statistics

from tick_shares import completions, daemon_logs, moded_ticks, window_text

KINDS = ("return", "return-beside", "beside-first", "beside", "drain", "paused", "gated")
FULL = 0.9  # a steady window: production in flight at least this share of it


def windows(text):
    """(mode, kernels completed, in-flight share, whether the opportunistic job launched) per tick
    line of one production and one opportunistic job; mode None before the first gate is known."""
    out = []
    for mode, tick in moded_ticks(text):
        speed = completions(tick.production[0]) if len(tick.production) == 1 else None
        if tick.opportunistic and tick.window_us and speed:
            done, in_flight_us = speed
            launched = int(tick.opportunistic[0][2]) > 0
            out.append((mode, done, min(1.0, in_flight_us / tick.window_us), launched))
    return out


def kind(entries, i):
    mode = entries[i][0]
    before = entries[i - 1]
    if before[2] == 0:
        return "return-beside" if mode == "beside" else "return"
    if mode == "beside":
        return "beside" if before[0] == "beside" else "beside-first"
    return "drain" if before[0] == "beside" else mode


def losses(entries):
    """(busy windows, {kind: [windows, loss in windows]}) or None without steady paused ones."""
    steady = [done for i, (mode, done, share, _) in enumerate(entries)
              if i >= 1 and mode == "paused" and entries[i - 1][0] == "paused"
              and share >= FULL and entries[i - 1][2] >= FULL]
    if not steady:
        return None
    solo = statistics.median(steady)
    out = {k: [0, 0.0] for k in KINDS}
    busy = 0
    for i in range(1, len(entries)):
        mode, done, share, _ = entries[i]
        if share == 0 or mode is None:
            continue
        busy += 1
        cell = out[kind(entries, i)]
        cell[0] += 1
        cell[1] += share - done / solo
    return busy, out


def cells(busy, out):
    total = sum(v[1] for v in out.values())
    return (f"{busy} | {total / busy:.3f} | " +
            " | ".join(f"{out[k][0]} / {out[k][1] / busy:.3f}" for k in KINDS))


def row_of(log_name):
    """The gpushare row (policy) of a daemon log's name: gpushared-<policy>[-repN].log."""
    return re.sub(r"-rep\d+$", "", log_name[len("gpushared-"):-len(".log")])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--after-idle", type=int, default=100, help="idle windows before the window")
    ap.add_argument("archives", nargs="+", help="PART-logs.tgz")
    args = ap.parse_args(argv)
    print("| part | daemon log | busy windows | loss | " +
          " | ".join(f"{k}: windows / loss" for k in KINDS) + " |")
    print("|---|---|---|---|" + "---|" * len(KINDS))
    for path in args.archives:
        part = os.path.basename(path).replace("-logs.tgz", "")
        pooled = {}  # row -> [busy windows, {kind: [windows, loss]}]
        for name, text in daemon_logs(path):
            result = losses(windows(window_text(text, args.after_idle)))
            if not result:
                continue
            busy, out = result
            row = pooled.setdefault(row_of(name), [0, {k: [0, 0.0] for k in KINDS}])
            row[0] += busy
            for k in KINDS:
                row[1][k][0] += out[k][0]
                row[1][k][1] += out[k][1]
            print(f"| {part} | {name[len('gpushared-'):-len('.log')]} | {cells(busy, out)} |")
        for row, (busy, out) in pooled.items():
            print(f"| {part} | **{row}, pooled** | {cells(busy, out)} |")


if __name__ == "__main__":
    main()
