#!/usr/bin/env python3
"""Draws a `gpusharectl record` trace (Chrome trace-event JSON, docs/metrics.md) as a PNG.

For when no trace viewer is at hand: one row per job with its launch rate (line) over its gate
state (red bands while paused) and memory instants (ticks), and the device policies on top.

    python3 tools/ctl/plot_timeline.py trace.json timeline.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(trace_path, png_path):
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    jobs = sorted(pid for pid in names if pid != 0)
    fig, axes = plt.subplots(len(jobs) + 1, 1, sharex=True, squeeze=False,
                             figsize=(10, 1.2 + 1.8 * len(jobs)))
    axes = [a[0] for a in axes]
    top = axes[0]
    for e in events:
        if e["pid"] == 0 and e["ph"] == "X":
            top.broken_barh([(e["ts"] / 1e6, e["dur"] / 1e6)], (e["tid"] - 0.4, 0.8), alpha=0.4)
            top.text(e["ts"] / 1e6, e["tid"], " " + e["name"], va="center", fontsize=8)
    top.set_ylabel("devices")
    top.set_yticks([])
    top.set_title("gpusharectl record: launch rate, gate and memory per job")
    for ax, pid in zip(axes[1:], jobs):
        rate = [(e["ts"] / 1e6, e["args"]["launches/s"]) for e in events
                if e["pid"] == pid and e["ph"] == "C" and e["name"] == "launches/s"]
        if rate:
            ax.plot(*zip(*rate), lw=1.2, label="launches/s")
        for e in events:
            if e["pid"] != pid:
                continue
            if e["ph"] == "X" and e["name"].startswith("paused"):
                ax.axvspan(e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6, color="red", alpha=0.15)
            if e["ph"] == "X" and e["name"] in ("swapping out", "on host", "swapping in"):
                ax.axvspan(e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6, color="purple", alpha=0.1)
            if e["ph"] == "i":
                ax.axvline(e["ts"] / 1e6, color="gray", lw=0.8, ls=":")
                ax.text(e["ts"] / 1e6, 0, " " + e["name"], rotation=90, fontsize=7, va="bottom")
        ax.set_ylabel(names[pid], fontsize=8)
        ax.set_ylim(bottom=0)
    axes[-1].set_xlabel("seconds (red: paused at the gate; purple: memory on host or moving)")
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
