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
                             figsize=(11, 1.4 + 1.8 * len(jobs)))
    axes = [a[0] for a in axes]
    top = axes[0]
    slices = [e for e in events if e["pid"] == 0 and e["ph"] == "X"]
    for i, e in enumerate(slices):
        top.broken_barh([(e["ts"] / 1e6, e["dur"] / 1e6)], (e["tid"] - 0.4, 0.8),
                        color="C%d" % (i % 10), alpha=0.35)
        top.text(e["ts"] / 1e6, e["tid"], " " + e["name"], va="center", fontsize=8)
    top.set_ylabel("devices")
    top.set_yticks([])
    top.set_title("gpusharectl record: launch rate, gate and memory per job")
    for ax, pid in zip(axes[1:], jobs):
        rate = [(e["ts"] / 1e6, e["args"]["launches/s"]) for e in events
                if e["pid"] == pid and e["ph"] == "C" and e["name"] == "launches/s"]
        labelled = []
        if rate:
            ax.plot(*zip(*rate), lw=1.2, label="launches/s")
            ax.set_ylim(0, max(r for _, r in rate) * 1.9 + 1)  # room for the event labels
        for e in events:
            if e["pid"] != pid:
                continue
            if e["ph"] == "X" and e["name"].startswith("paused"):
                ax.axvspan(e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6, color="red", alpha=0.15)
            if e["ph"] == "X" and e["name"] in ("swapping out", "on host", "swapping in"):
                ax.axvspan(e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6, color="purple", alpha=0.1)
            if e["ph"] == "i":
                x = e["ts"] / 1e6
                ax.axvline(x, color="gray", lw=0.8, ls=":")
                # Labels of events close together are moved apart, inside the plot.
                while any(abs(x - taken) < 0.06 for taken in labelled):
                    x += 0.06
                labelled.append(x)
                ax.text(x, 0.97, " " + e["name"], rotation=90, fontsize=7, va="top",
                        transform=ax.get_xaxis_transform())
        ax.set_ylabel(names[pid].replace(" (", "\n("), fontsize=8)
    axes[-1].set_xlabel("seconds  (line: launches/s; red: paused at the gate; "
                        "purple: memory on host or moving; dotted: events)")
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
