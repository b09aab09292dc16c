#!/usr/bin/env python3
"""Tick-log analysis of gpushared trace logs in the archives gpu_round.sh writes (PART-logs.tgz).

For each daemon log (gpushared-<policy>.log) in each archive given (default: every
call*-logs.tgz in the current folder):
  - busy ticks: tick lines where some production token (jobN:P:...) launched > 0 kernels
    (the same definition as tests/daemon/mps_test.cpp: a tick whose P token starts "0l" is idle);
  - of those, the share where the opportunistic gate was (paused), (gated) or neither (= beside);
    a gated window the budget held because production left no gaps (its budget text ends in
    " held") counts as paused, as its gates were;
  - the same shares over idle ticks (production launched nothing while an O job was there);
  - the last "budget ..." text of the log (each mode's cost±error(pairs)/gain:share), and the last one
    whose costs are all measured (no "?");
  - the first reading of beside's cost (its "beside=cost±error(pairs)/gain:share" token, the first
    without "?"): a reading noise made large on a fresh daemon's first pairs of periods is what
    held the opportunistic job in the gappy runs that harvested little (docs/benchmarks.md §4y);
  - production's start-up (start_up_windows): its windows with progress before the first one in
    flight at least 90 % of it at 0.8 of its steady speed (the median speed of such windows in the
    log's second half); the policy's warm-up counts 15 (warm_up_ms 750);
  - production's speed in each mode: kernels completed per ms it had work in flight, the median
    over windows in flight at least 90 % of the window, leaving out each mode's first window (the
    one the mode changed in). Beside a launch-bound job (2026-11-26, §4m) the budget's costs and
    these medians disagreed in some runs; this is what showed it.
  - production's kernels completed per busy window in each mode (the median, every busy window
    but each mode's first: a launch-bound job, in flight part of each window, shows its speed
    here and not in the column above);
  - the runs of windows in a row that production, busy, ran beside the opportunistic job (the
    mode each window ran in: the gate the line before gave; beside_runs): their lengths, and how
    many ran three windows or more. A server's queue grows for as long as beside runs unbroken
    (docs/policies.md "A costly mode, one window at a time"; calls 82-85, §4z);
  - the beside share of the first EARLY busy ticks (default 60: the 3 s of busy production of a 6 s
    S5 window at 1 s on / 1 s off, where a fresh daemon learns) and of the busy ticks after them
    (a long window's, run.py --late-s).
--window: read only each log's benchmark window (window_text): without the harness's warm-up
before it, and without a production control's window (S5_CONTROLS), which the first gpushare
row's daemon also serves.
Usage: python3 tools/bench/tick_shares.py [--early N] [--window] [archive.tgz ...]  (prints a markdown table)
  e.g. python3 tools/bench/tick_shares.py docs/bench-results/2026-11-26-e/*-logs.tgz
"""
import glob
import os
import re
import statistics
import sys
import tarfile
from typing import NamedTuple, Optional

TOKEN = re.compile(r"job(\d+):([PO]):(\d+)l/(\d+)w(\S*)")
WINDOW = re.compile(r" window=(\d+)us")
SPEED = re.compile(r"/(\d+)c->[^/]*/(\d+)us-busy")
PACED = re.compile(r"/(\d+)us-paced")
BESIDE = re.compile(r"beside=\S+")


class Tick(NamedTuple):
    """One tick line: the window's length (None if the line has none) and its job tokens."""
    window_us: Optional[int]
    production: list
    opportunistic: list


def ticks(text):
    """The tick lines of a daemon log, in order."""
    for line in text.splitlines():
        if " tick device=" not in line:
            continue
        tokens = TOKEN.findall(line)
        window = WINDOW.search(line)
        yield Tick(int(window.group(1)) if window else None, [t for t in tokens if t[1] == "P"],
                   [t for t in tokens if t[1] == "O"])


def moded_ticks(text):
    """(mode, tick) per tick line: the mode the window the line reports ran in, which is the gate
    the previous line gave the opportunistic job (None before the first such line)."""
    previous = None
    for tick in ticks(text):
        yield previous, tick
        if tick.opportunistic:
            previous = gate(tick.opportunistic[0])


def window_text(text, after_idle=100):
    """The tick lines of a daemon log's benchmark window (joined), for logs of gpu_round.sh's S5
    parts. The log is cut where production idled at least `after_idle` ticks (the harness starts
    production for a warm-up, then idles it while the other rows run); a production control's
    periods (S5_CONTROLS: the first gpushare row's daemon also serves `isolated-prod-gs`, before
    or after the row, the same workers with the opportunistic one idle), a busy phase and the idle
    one after it in which the opportunistic job never launched, are left out; of what remains the
    piece with the most busy ticks is the window."""
    lines = [line for line in text.splitlines() if " tick device=" in line]
    marks = []  # (production busy, the opportunistic job launched) per line
    for tick in ticks(text):
        busy = any(int(t[2]) > 0 or (completions(t) or (0, 0))[1] > 0 for t in tick.production)
        marks.append((busy, any(int(t[2]) > 0 for t in tick.opportunistic)))
    pieces, piece, idle = [], [], 0
    for i, (busy, _) in enumerate(marks):
        idle = 0 if busy else idle + 1
        piece.append(i)
        if idle == after_idle:
            pieces.append(piece)
            piece = []
    pieces.append(piece)

    def without_controls(indices):
        kept, period = [], []
        for i in indices:
            if period and marks[i][0] and not marks[period[-1]][0]:  # a busy phase begins
                kept += period if any(marks[j][1] for j in period) else []
                period = []
            period.append(i)
        return kept + (period if any(marks[j][1] for j in period) else [])

    best = max((without_controls(p) for p in pieces), key=lambda p: sum(1 for i in p if marks[i][0]))
    return "\n".join(lines[i] for i in best)


def gate(token):
    """An opportunistic token's gate for the next window: paused, gated or beside."""
    return "paused" if "(paused)" in token[4] else "gated" if "(gated)" in token[4] else "beside"


def completions(token):
    """A production token's (kernels completed, µs in flight) in the window; None if not reported."""
    speed = SPEED.search(token[4])
    return (int(speed.group(1)), int(speed.group(2))) if speed else None


def paced(token):
    """A production token's µs in flight that its window's completions took (the daemon's
    JobObservation::paced_in_flight_ns, logged since the twenty-ninth session); None if not
    reported (an older daemon, or a window without completions)."""
    found = PACED.search(token[4])
    return int(found.group(1)) if found else None


def daemon_logs(path):
    """(name, text) of each daemon log (gpushared-<policy>.log) in an archive."""
    with tarfile.open(path) as tar:
        for m in sorted(tar.getmembers(), key=lambda m: m.name):
            name = os.path.basename(m.name)
            if name.startswith("gpushared-") and name.endswith(".log"):
                yield name, tar.extractfile(m).read().decode("utf-8", "replace")


class Analysis(NamedTuple):
    """analyse()'s readings of one daemon log (modes: paused, gated, beside)."""
    busy: dict        # busy ticks per mode
    idle: dict        # idle ticks per mode
    last_budget: Optional[str]
    last_measured: Optional[str]
    speeds: dict      # production's kernels per ms in flight, windows in flight >= 90 %
    busy_states: list  # the mode of each busy tick, in order
    per_window: dict  # production's kernels completed per busy window, whatever its in-flight share
    first_beside: Optional[str] = None  # the first "beside=..." token with beside's cost known


def analyse(text):
    idle = {"paused": 0, "gated": 0, "beside": 0}
    busy_states = []  # the gate of each busy tick, in order (their counts: `busy` below)
    speeds = {"paused": [], "gated": [], "beside": []}
    per_window = {"paused": [], "gated": [], "beside": []}  # kernels completed, every busy window
    previous = None  # the opportunistic gate of the last tick
    last_budget = last_measured = first_beside = None
    for line in text.splitlines():
        b = line.find(" budget ") if " tick device=" in line else -1
        if b >= 0:
            last_budget = line[b + 1:]
            beside = BESIDE.search(last_budget)
            if first_beside is None and beside and not beside.group(0).startswith("beside=?"):
                first_beside = beside.group(0)
            if "?" not in last_budget.split(":")[0] and "?/" not in last_budget and "=?" not in last_budget:
                last_measured = last_budget
    for tick in ticks(text):
        prods, opps = tick.production, tick.opportunistic
        if not prods or not opps:
            continue
        is_busy = any(int(t[2]) > 0 for t in prods)
        state = None
        for t in opps:
            state = gate(t)
            if is_busy:
                busy_states.append(state)
            else:
                idle[state] += 1
        speed = completions(prods[0]) if len(prods) == 1 else None
        if tick.window_us and speed and state == previous:
            done, in_flight_us = speed
            if is_busy:
                per_window[state].append(done)
            if in_flight_us >= 0.9 * tick.window_us:
                speeds[state].append(done / (in_flight_us / 1000))
        previous = state
    busy = {mode: busy_states.count(mode) for mode in ("paused", "gated", "beside")}
    return Analysis(busy, idle, last_budget, last_measured, speeds, busy_states, per_window, first_beside)


def start_up_windows(text):
    """Production's windows with progress before its first full window (in flight at least 90 %
    of it) at 0.8 of its steady speed: the median kernels per ms in flight of the full windows
    in the second half of the log. None where there are none."""
    speeds = []  # (kernels completed, µs in flight, window µs) of each window with progress
    for tick in ticks(text):
        speed = completions(tick.production[0]) if len(tick.production) == 1 else None
        if speed and speed[0] > 0 and tick.window_us:
            speeds.append((*speed, tick.window_us))
    full = [done / in_flight for done, in_flight, window in speeds if in_flight >= 0.9 * window]
    if not full:
        return None
    steady = statistics.median(full[len(full) // 2:])
    return next((i for i, (done, in_flight, window) in enumerate(speeds)
                 if in_flight >= 0.9 * window and done / in_flight >= 0.8 * steady), None)


def beside_runs(text):
    """{length: count} of the runs of windows in a row that ran beside with production busy (the
    mode a window ran in: moded_ticks)."""
    runs, run = {}, 0
    for mode, tick in moded_ticks(text):
        if mode == "beside" and any(int(t[2]) > 0 for t in tick.production):
            run += 1
            continue
        if run:
            runs[run] = runs.get(run, 0) + 1
        run = 0
    if run:
        runs[run] = runs.get(run, 0) + 1
    return dict(sorted(runs.items()))


def early_late(states, early):
    """The beside share of the first `early` busy ticks and of those after ("–" where none)."""
    def share(part):
        return f"{sum(1 for s in part if s == 'beside') / len(part):.2f}" if part else "–"
    return share(states[:early]), share(states[early:])


def shares(d):
    n = sum(d.values())
    if not n:
        return n, "–"
    return n, " / ".join(f"{d[k] / n:.2f}" for k in ("paused", "gated", "beside"))


def main(paths):
    early, window = 60, False
    while paths[:1] in (["--early"], ["--window"]):
        if paths[0] == "--window":
            window, paths = True, paths[1:]
        else:
            early, paths = int(paths[1]), paths[2:]
    if not paths:
        paths = sorted(glob.glob("call*-logs.tgz"))
    print("| part | policy | busy ticks | paused / gated / beside (prod busy) "
          "| idle ticks | paused / gated / beside (prod idle) | prod kernels/ms paused / gated / beside "
          f"(windows) | prod kernels per busy window paused / gated / beside | beside, first {early} busy "
          "ticks / after | beside runs (windows: count) | runs of 3+ | production's start-up, windows "
          "| first beside reading | last budget line | last fully measured budget |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for path in paths:
        part = os.path.basename(path).replace("-logs.tgz", "")
        for name, text in daemon_logs(path):
            busy, idle, last, measured, speeds, states, per_window, first_beside = analyse(
                window_text(text) if window else text)
            policy = name[len("gpushared-"):-len(".log")]
            nb, sb = shares(busy)
            ni, si = shares(idle)
            sp = " / ".join(f"{statistics.median(v):.1f} ({len(v)})" if v else "–"
                            for v in (speeds[k] for k in ("paused", "gated", "beside")))
            first, after = early_late(states, early)
            pw = " / ".join(f"{statistics.median(v):.0f} ({len(v)})" if v else "–"
                            for v in (per_window[k] for k in ("paused", "gated", "beside")))
            runs = beside_runs(window_text(text) if window else text)
            listed = ", ".join(f"{n}: {c}" for n, c in runs.items()) or "–"
            long_runs = sum(c for n, c in runs.items() if n >= 3)
            print(f"| {part} | {policy} | {nb} | {sb} | {ni} | {si} | {sp} | {pw} | {first} / {after} | "
                  f"{listed} | {long_runs} | {start_up_windows(text)} | {first_beside or '(none)'} | "
                  f"{last or '(none)'} | {measured or '(none)'} |")


if __name__ == "__main__":
    main(sys.argv[1:])
