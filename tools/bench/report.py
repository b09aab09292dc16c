"""Markdown tables and PNG plots of one scenario's result (pure functions of its JSON)."""

import math


def fmt(sp, digits=2, scale=1.0):
    """'median [min–max]' over repetitions, or '–' when there is nothing."""
    if not sp:
        return "–"
    m, lo, hi = (sp[k] * scale for k in ("median", "min", "max"))
    if any(math.isnan(v) for v in (m, lo, hi)):
        return "–"
    return f"{m:.{digits}f} [{lo:.{digits}f}–{hi:.{digits}f}]"


def _note(row):
    if row.get("status") == "ok":
        return ""
    return f"{row.get('status')}: {row.get('reason', '')}".replace("|", "/").replace("\n", " ")


def _table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
    return "\n".join(out)


def markdown(result):
    s = result["scenario"]
    meta = result["meta"]
    head = [f"### {s}: {result.get('title', '')}", "",
            f"- date {meta['date']}, GPU `{meta['gpu']}`",
            f"- command: `{meta['command']}`",
            f"- window {meta['window_s']} s, {meta['reps']} repetitions (interleaved), workloads: "
            + ", ".join(f"{k} `{v}`" for k, v in result.get("workloads", {}).items()),
            f"- SM clock during windows: {meta.get('sm_clock_range', 'not read')}; "
            f"nvidia-smi before: `{meta.get('smi_before', '')}`, after: `{meta.get('smi_after', '')}`",
            f"- cells: median [min–max] over repetitions", "", ""]
    rows = result["rows"]
    if s == "S1":
        late = result.get("late_s") or 0
        late_heads = [f"prod NT after {late:g} s", f"opp NT after {late:g} s"] if late else []
        body = ("prod NT (paired): each repetition against the isolated runs of the same repetition\n\n"
                + _table(["configuration", "prod it/s", "opp it/s", "prod NT", "prod NT (paired)", "opp NT", "total NT"]
                         + late_heads + ["note"],
                         [[r["config"], fmt(r.get("prod_its"), 1), fmt(r.get("opp_its"), 1), fmt(r.get("prod_nt"), 3),
                           fmt(r.get("prod_nt_paired"), 3), fmt(r.get("opp_nt"), 3), fmt(r.get("total_nt"), 3)]
                          + ([fmt(r.get("prod_nt_late"), 3), fmt(r.get("opp_nt_late"), 3)] if late else [])
                          + [_note(r)] for r in rows]))
    elif s == "S2":
        iso_opp = next((r.get("opp_its") for r in rows if r["config"] == "isolated-opp"), None)
        caps = ", ".join(f"{c:.1f}" for c in result.get("capacity_windows_rps", []))
        body = (f"solo capacity (closed loop, one request at a time): {result.get('capacity_rps', float('nan')):.1f} "
                f"requests/s (median of windows: {caps or 'one window'})"
                f"; isolated opportunistic training: {fmt(iso_opp, 2)} it/s\n\n")
        body += _table(["configuration", "load", "p50 ms", "p95 ms", "p99 ms", "served", "opp NT", "note"],
                       [[r["config"], r.get("load", ""), fmt(r.get("p50_ms"), 2), fmt(r.get("p95_ms"), 2),
                         fmt(r.get("p99_ms"), 2), fmt(r.get("served"), 3), fmt(r.get("opp_nt"), 3), _note(r)]
                        for r in rows])
    elif s == "S3":
        counts = result.get("clients", [])
        bases = ["time-slicing", "mps", "streams"] + list(dict.fromkeys(
            r["baseline"] for r in rows if str(r.get("baseline", "")).startswith("gpushare") and r.get("clients")))
        by = {(r.get("baseline"), r.get("clients")): r for r in rows}
        body = "mean seconds per inference (one request = one batch)\n\n" + _table(
            ["baseline"] + [f"N={n}" for n in counts],
            [[b] + [fmt(by.get((b, n), {}).get("s_per_inference"), 4) if by.get((b, n), {}).get("status") == "ok"
                    else _note(by.get((b, n), {"status": "missing"})) for n in counts] for b in bases])
        body += "\n\ntotal requests per second, all clients\n\n" + _table(
            ["baseline"] + [f"N={n}" for n in counts],
            [[b] + [fmt(by.get((b, n), {}).get("total_rps"), 1) for n in counts] for b in bases])
        body += "\n\n" + "\n".join(f"- {r['config']}: {_note(r)}" for r in rows if r.get("clients") is None)
    elif s == "S4":
        def cell(r, key, fmt_=str):
            v = r.get(key)
            return "–" if v is None else fmt_(v)

        yes_no = lambda v: "yes" if v else "**NO**"  # noqa: E731
        body = (f"capacity {result.get('capacity_gib')} GiB; the opportunistic job starts first and "
                f"production joins after its step {result.get('head_start_steps')}\n\n")
        body += _table(["configuration", "production", "opportunistic", "prod NT (all steps / steady)",
                        "weights = isolated (prod / opp)", "opp longest pause s", "peak reserved GiB (prod / opp)",
                        "view total GiB (prod / opp)", "note"],
                       [[r["config"] + (f" ({r['how']})" if r.get("how") else ""), cell(r, "prod_outcome"),
                         cell(r, "opp_outcome"), f"{cell(r, 'prod_nt_wall')} / {cell(r, 'prod_nt_steady')}",
                         f"{cell(r, 'prod_weights_equal', yes_no)} / {cell(r, 'opp_weights_equal', yes_no)}",
                         cell(r, "opp_longest_gap_s"),
                         f"{cell(r, 'prod_peak_reserved_gib')} / {cell(r, 'opp_peak_reserved_gib')}",
                         f"{cell(r, 'prod_view_total_gib')} / {cell(r, 'opp_view_total_gib')}", _note(r)]
                        for r in rows])
    elif s == "S7":
        names = result.get("names", [])
        body = (f"capacity {result.get('capacity_gib')} GiB; peak reserved in the isolated runs: "
                f"{result.get('demand_gib')} GiB in all, {result.get('rotating_gib')} GiB of it the rotating jobs'; "
                f"rotation rows: `min_turn_ms` {result.get('min_turn_ms')}\n\n")
        body += _table(["configuration", "makespan s"] + [f"{k} NT" for k in names]
                       + ["prod NT steady", "weights = isolated", "GB moved", "prefetch s (hidden)",
                          "switch copies s", "note"],
                       [[r["config"], r.get("makespan_s", "–")] + [r.get(f"{k}_nt_wall", "–") for k in names]
                        + [r.get("prod_nt_steady", "–"), r.get("weights", "–"), r.get("moved_gb", "–"),
                           r.get("prefetch_s", "–"), r.get("switch_s", "–"),
                           (r.get("note") or _note(r)).replace("|", "/")] for r in rows])
    elif s == "S5":
        body = (f"production on {result.get('on_s')} s / off {result.get('off_s')} s; reaction times have "
                f"a resolution of {result.get('bin_s', 0) * 1000:.0f} ms; prod NT (paired): each repetition "
                "against the isolated run of the same repetition\n\n")
        late = result.get("late_s") or 0
        late_heads = ([f"prod NT after {late:g} s", f"opp NT (prod on) after {late:g} s",
                       f"opp NT (prod off) after {late:g} s"] if late else [])
        body += _table(["configuration", "prod it/s", "opp it/s", "prod NT", "prod NT (paired)", "opp NT (prod on)",
                        "opp NT (prod off)", "give way ms", "take back ms"] + late_heads + ["note"],
                       [[r["config"], fmt(r.get("prod_its"), 1), fmt(r.get("opp_its"), 1), fmt(r.get("prod_nt"), 3),
                         fmt(r.get("prod_nt_paired"), 3), fmt(r.get("opp_nt_on"), 3), fmt(r.get("opp_nt_off"), 3),
                         fmt(r.get("give_way_ms"), 0), fmt(r.get("take_back_ms"), 0)]
                        + ([fmt(r.get(k), 3) for k in ("prod_nt_late", "opp_nt_on_late", "opp_nt_off_late")]
                           if late else []) + [_note(r)] for r in rows])
    elif s == "S6":
        body = _table(["workload", "plain it/s", "with shim it/s", "overhead %", "launches the shim counted", "note"],
                      [[r["config"], fmt(r.get("plain_its"), 2), fmt(r.get("shim_its"), 2),
                        fmt(r.get("overhead_pct"), 2), (r.get("shim_report") or {}).get("launches", "–"), _note(r)]
                       for r in rows])
    else:
        body = _table(["configuration", "note"], [[r["config"], _note(r)] for r in rows])
    return "\n".join(head) + body + "\n"


def plot(result, path):
    """One PNG per scenario; returns None, or why no plot was made."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed"
    s, rows = result["scenario"], [r for r in result["rows"] if r.get("status") == "ok"]
    fig, ax = plt.subplots(figsize=(8, 4), dpi=90)

    def bars(keys, labels):
        names = [r["config"] for r in rows if any(r.get(k) for k in keys)]
        width = 0.8 / len(keys)
        for j, (k, lab) in enumerate(zip(keys, labels)):
            xs, ys, err = [], [], [[], []]
            for i, r in enumerate(r for r in rows if r["config"] in names):
                sp = r.get(k)
                if not sp:
                    continue
                xs.append(i + j * width)
                ys.append(sp["median"])
                err[0].append(sp["median"] - sp["min"])
                err[1].append(sp["max"] - sp["median"])
            ax.bar(xs, ys, width, yerr=err, capsize=2, label=lab)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
        ax.set_xticklabels(names, rotation=35, ha="right", fontsize=8)

    if s == "S1":
        bars(["prod_nt", "opp_nt", "total_nt"], ["production NT", "opportunistic NT", "total NT"])
        ax.axhline(1.0, color="gray", lw=0.5)
        ax.set_ylabel("normalized throughput")
    elif s == "S2":
        for base in sorted({r["config"].rsplit("@", 1)[0] for r in rows if "@" in r["config"]}):
            pts = sorted((r["load"], r["p99_ms"]) for r in rows if r["config"].rsplit("@", 1)[0] == base and r.get("p99_ms"))
            if pts:
                ax.errorbar([p[0] for p in pts], [p[1]["median"] for p in pts],
                            yerr=[[p[1]["median"] - p[1]["min"] for p in pts], [p[1]["max"] - p[1]["median"] for p in pts]],
                            marker="o", capsize=2, label=base)
        ax.set_yscale("log")
        ax.set_xlabel("production load (fraction of solo capacity)")
        ax.set_ylabel("production p99 latency, ms")
    elif s == "S3":
        for base in ("time-slicing", "mps", "streams"):
            pts = [(r["clients"], r["s_per_inference"]) for r in rows if r.get("baseline") == base and r.get("s_per_inference")]
            if pts:
                ax.errorbar([p[0] for p in pts], [p[1]["median"] for p in pts],
                            yerr=[[p[1]["median"] - p[1]["min"] for p in pts], [p[1]["max"] - p[1]["median"] for p in pts]],
                            marker="o", capsize=2, label=base)
        ax.set_xlabel("clients N")
        ax.set_ylabel("mean seconds per inference")
    elif s == "S5":
        bin_s = result.get("bin_s", 0.05)
        for base, profs in result.get("profiles", {}).items():
            mean = [sum(p[i] for p in profs) / len(profs) for i in range(len(profs[0]))]
            ax.plot([(i + 0.5) * bin_s for i in range(len(mean))], mean, label=base, lw=1)
        ax.axvline(result.get("on_s", 0), color="gray", ls="--", lw=0.8)
        ax.set_xlabel("seconds since production switched on (folded over periods)")
        ax.set_ylabel("opportunistic it/s")
    elif s == "S4":
        # Device-resident memory of each job over time in the gpushare row, as gpusharectl saw it.
        samples = (result.get("timelines") or {}).get("gpushare") or []
        if not samples:
            plt.close(fig)
            return "no gpushare timeline (needs --gpusharectl)"
        for cls, style in (("production", "-"), ("opportunistic", "--")):
            ts, ys = [], []
            for smp in samples:
                jobs = [j for j in smp["jobs"] if j.get("class") == cls]
                resident = sum((j.get("bytes") or 0) - ((j.get("swappable") or 0) if j.get("state") == "swapped-out"
                                                        else 0) for j in jobs)
                ts.append(smp["t"])
                ys.append(resident / 2**30)
            ax.plot(ts, ys, style, label=f"{cls}: on the device")
        ax.axhline(result.get("capacity_gib", 0), color="gray", lw=0.8, ls=":", label="capacity")
        ax.set_xlabel("seconds")
        ax.set_ylabel("GiB")
    elif s == "S7":
        shown = [r for r in rows if r.get("makespan_s")]
        if not shown:
            plt.close(fig)
            return "no row completed"
        ax.bar(range(len(shown)), [r["makespan_s"] for r in shown])
        ax.set_xticks(range(len(shown)))
        ax.set_xticklabels([r["config"] for r in shown], rotation=35, ha="right", fontsize=8)
        ax.set_ylabel("makespan s")
        ax.bar([], [], label="makespan of the opportunistic jobs")
    elif s == "S6":
        bars(["overhead_pct"], ["overhead % (1 - with shim / plain)"])
        ax.axhline(0.0, color="gray", lw=0.5)
        ax.set_ylabel("%")
    else:
        plt.close(fig)
        return "nothing to plot"
    ax.set_title(f"{s}: {result.get('title', '')}", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None
