#!/usr/bin/env python3
"""One round's production and opportunistic NT per configuration, every part in one plot (SVG).

The harness plots each part on its own (`report.py`; for S5 the opportunistic job's rate over the
on/off period). A round of docs/benchmarks.md sets several parts side by side: this reads their
tables (the `callN-PART.md` files the harness wrote) and draws, for each part and each
configuration asked for, two bars: production's NT (S5: while busy) and the opportunistic job's NT
(S5: while production is busy), each with its median and its range over the repetitions. Plain SVG:
no plotting library is needed.

A part given as LABEL=PART.md#late is drawn from the table's "after X s" columns (run.py --late-s:
the window's later part, a fresh daemon's learning left out); the same table may be given twice,
once each way.

Usage: python3 tools/bench/round_plot.py OUT.svg LABEL=PART.md[#late] ... [--row NAME=TEXT ...]
  --row NAME=TEXT: a configuration to draw, the first table row whose configuration contains TEXT
  (default: MPS-prio=mps-prio).
  e.g. python3 tools/bench/round_plot.py docs/bench-results/2026-11-26-n/round.svg \\
         "S5 gappy 1 s (47)=docs/bench-results/2026-11-26-n/call47-s5g1.md" \\
         --row "this build=gpushare:harvest" --row "before=gpushare:old+" --row MPS-prio=mps-prio
"""
import argparse
import re
import sys
from xml.sax.saxutils import escape

CELL = re.compile(r"^\s*([0-9.]+)\s*\[([0-9.]+)[–-]([0-9.]+)\]\s*$")
PRODUCTION = ("prod NT",)
OPPORTUNISTIC = ("opp NT (prod on)", "opp NT")
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")


def cell(text):
    """(median, low, high) of a "median [min–max]" cell; None for "–" or anything else."""
    m = CELL.match(text)
    return tuple(float(g) for g in m.groups()) if m else None


def table(markdown):
    """The harness's first table that has a `configuration` column: {configuration: {column: text}}."""
    rows, header = {}, None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            if header and rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "configuration":
            header = cells
        elif header and not set(cells[0]) <= set("-: "):
            rows[cells[0]] = dict(zip(header, cells))
    return rows


LATE = re.compile(r" after [0-9.]+ s$")


def pick(row, columns, late=False):
    """The first of `columns` the row has (late: that column's "after X s" form)."""
    for c in columns:
        for key in row:
            if (LATE.sub("", key) == c and key != c) if late else key == c:
                return cell(row[key])
    return None


def measures(markdown, wanted, late=False):
    """For each (name, text) in `wanted`: (production, opportunistic), each (median, low, high)."""
    rows = table(markdown)
    out = []
    for name, text in wanted:
        row = next((r for config, r in rows.items() if text in config), None)
        out.append((name, (pick(row, PRODUCTION, late), pick(row, OPPORTUNISTIC, late)) if row
                    else (None, None)))
    return out


def svg(parts, names):
    """parts: [(label, [(name, (production, opportunistic))])]."""
    bar, gap, group_gap, top, height, left = 9, 3, 26, 40, 220, 50
    per_part = len(names) * 2 * (bar + gap) + group_gap
    # Room on the right for the last part's slanted label, and for the caption.
    width = max(left + per_part * len(parts) + 150, 720)
    scale = height / 1.2
    y = lambda v: top + height - v * scale  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 115}" '
           'font-family="sans-serif" font-size="11">']
    for v in (0, 0.5, 0.95, 1.0):
        colour = "#d62728" if v == 0.95 else "#bbbbbb"
        out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   f'stroke="{colour}" stroke-dasharray="{"4,3" if v == 0.95 else "none"}"/>')
        if v != 1.0:  # 1 and 0.95 would overlap: the line at 1 speaks for itself
            out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for p, (label, values) in enumerate(parts):
        x0 = left + p * per_part + group_gap / 2
        for n, (name, pair) in enumerate(values):
            for k, value in enumerate(pair):
                x = x0 + (n * 2 + k) * (bar + gap)
                if value is None:
                    continue
                median, low, high = value
                colour = COLOURS[n % len(COLOURS)]
                opacity = "1" if k == 0 else "0.45"
                out.append(f'<rect x="{x:.1f}" y="{y(min(median, 1.2)):.1f}" width="{bar}" '
                           f'height="{min(median, 1.2) * scale:.1f}" fill="{colour}" '
                           f'fill-opacity="{opacity}"/>')
                out.append(f'<line x1="{x + bar / 2:.1f}" x2="{x + bar / 2:.1f}" '
                           f'y1="{y(min(low, 1.2)):.1f}" y2="{y(min(high, 1.2)):.1f}" stroke="black"/>')
        cx = x0 + len(names) * (bar + gap)
        out.append(f'<text transform="translate({cx:.1f},{top + height + 12}) rotate(35)">'
                   f'{escape(label)}</text>')
    out.append(f'<text x="{left}" y="16">production NT (solid) and opportunistic NT (pale), median '
               'and range over the repetitions; S5: while production is busy; red: 0.95</text>')
    for n, name in enumerate(names):
        out.append(f'<rect x="{left + n * 120}" y="22" width="10" height="10" '
                   f'fill="{COLOURS[n % len(COLOURS)]}"/>')
        out.append(f'<text x="{left + n * 120 + 14}" y="31">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("parts", nargs="+", help="LABEL=PART.md")
    parser.add_argument("--row", action="append", default=[], help="NAME=TEXT")
    args = parser.parse_args(argv)
    wanted = [tuple(r.split("=", 1)) for r in (args.row or ["MPS-prio=mps-prio"])]
    if any(len(w) != 2 for w in wanted) or any("=" not in p for p in args.parts):
        parser.error("each part is LABEL=PART.md and each --row NAME=TEXT")
    parts = []
    for part in args.parts:
        label, path = part.rsplit("=", 1)
        late = path.endswith("#late")
        with open(path.removesuffix("#late"), encoding="utf-8") as f:
            parts.append((label, measures(f.read(), wanted, late)))
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(svg(parts, [name for name, _ in wanted]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
