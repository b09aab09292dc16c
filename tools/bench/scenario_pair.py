"""S1, S2 and S5: a production job and an opportunistic job, under every baseline.

S1  both training, closed loop; NT = shared / isolated per job, and their sum.
S2  production = inference with Poisson arrivals at 30/50/70 % of its measured solo capacity,
    opportunistic = training; production latency from the scheduled arrival (p50/p95/p99).
S5  production switches on and off (bursts); how fast the opportunistic job gives way when
    production starts and takes the GPU back when it stops.
"""

import statistics
import sys

import baselines as bl
from harness import Placement
from experiment import Unit, percentile, spread, throughput, throughput_from
from gpushare_hook import Gpushare

NOT_APPLICABLE = {
    ("S2", "sequential"): "not meaningful: an open-loop service cannot wait for training to finish",
    ("S2", "ticktock"): "not applicable: TickTock alternates forward/backward phases of two training jobs; "
                        "inference has no backward phase",
    ("S5", "sequential"): "not meaningful: bursts are the production job's own on/off pattern",
    ("S5", "ticktock"): "not applicable: TickTock needs two jobs that never pause; production here pauses",
    ("S2", "mps-thr20"): "left out to fit the time budget (S1 has the 20 and 10 % limits)",
    ("S2", "mps-thr10"): "left out to fit the time budget (S1 has the 20 and 10 % limits)",
    # S5 keeps the 10 % limit: the schedule must run under plain MPS and under MPS 100/10 to show
    # that no static setting serves both phases.
    ("S5", "mps-thr30"): "left out to fit the time budget (S5 keeps plain MPS and the 10 % limit)",
    ("S5", "mps-thr20"): "left out to fit the time budget (S5 keeps plain MPS and the 10 % limit)",
}
DEFAULTS = {"S1": ("resnet50_train_b32", "resnet50_train_b32"),
            "S2": ("resnet50_infer_b8", "transformer_train_b32"),
            "S5": ("resnet50_train_b8", "mobilenet_v2_train_b64")}


def _setup(exp, scenario):
    args = exp.args
    prod, opp = args.prod or DEFAULTS[scenario][0], args.opp or DEFAULTS[scenario][1]
    wanted = [b for b in bl.ALL if b not in (args.skip or [])]
    gs = Gpushare(args.shim, args.gpushare_daemon, args.gpushare_policy, exp.pool.root,
                  log_level=getattr(args, "gpushare_log_level", "info"))
    exp.gpushare = gs
    gs.start_daemons(exp.pool.log_dir)
    all_rows = wanted + gs.baselines()
    skipped = {b: NOT_APPLICABLE[(scenario, b)] for b in all_rows if (scenario, b) in NOT_APPLICABLE}
    for b in gs.baselines():
        if not gs.available(b):
            skipped[b] = gs.reason(b)
    shared = [b for b in all_rows if b != "isolated" and b not in skipped]
    specs = bl.worker_specs(prod, opp, shared, gs)
    if warning := bl.worker_count_warning(specs):
        print(f"  warning: {warning}", file=sys.stderr, flush=True)
    exp.pool.start(specs)
    exp.gpushare_specs = [s for s in specs if s.label.startswith("gs-")]
    return prod, opp, all_rows, shared, skipped, gs


def _closed(window):
    return {"mode": "closed", "start": 0.0, "end": window}


def run_s1(exp):
    args, pool, W = exp.args, exp.pool, exp.args.window
    prod, opp, all_rows, shared, skipped, gs = _setup(exp, "S1")
    task = _closed(W)
    # The isolated rates are the denominator of every NT, and their window-to-window noise on the
    # H100 (±6 %) was most of the difference between two runs: each is measured in
    # `isolated_windows` windows per repetition, and NT is taken against their median.
    k_iso = max(1, getattr(args, "isolated_windows", 2))
    units = [Unit(_iso_name(role, k), lambda rep, role=role: bl.isolated(pool, role, task), W)
             for role in ("prod", "opp") for k in range(k_iso)]
    units += _production_controls(pool, shared, task, W)
    units += [Unit(b, lambda rep, b=b: bl.placements(pool, b, task, task, gs), W) for b in shared]
    thr = {}  # (config, rep) -> {"prod": it/s, "opp": it/s}
    # --late-s: the same rates over the window after `late` seconds only (a fresh daemon learns at
    # the window's start; this tells how it shares afterwards).
    late = max(0.0, getattr(args, "late_s", 0.0))
    late = late if late < W else 0.0
    thr_late = {}

    def keep(unit, rep, res):
        thr[(unit.name, rep)] = {tag: throughput(r, W, W) for tag, r in res.items()}
        if late:
            thr_late[(unit.name, rep)] = {tag: throughput_from(r, late, W) for tag, r in res.items()}

    exp.run_reps(units, args.reps, keep)
    iso = {role: _pooled_isolated(thr, role, args.reps, k_iso) for role in ("prod", "opp")}
    iso_late = {role: _pooled_isolated(thr_late, role, args.reps, k_iso) for role in ("prod", "opp")}
    iso_by_rep = {}  # production's isolated rate in each repetition: the mean of its windows
    for r in range(args.reps):
        vals = [thr[(_iso_name("prod", k), r)]["prod"] for k in range(k_iso) if (_iso_name("prod", k), r) in thr]
        if vals:
            iso_by_rep[r] = statistics.fmean(vals)

    def paired(name):
        return _paired({r: thr[(name, r)]["prod"] for r in range(args.reps) if (name, r) in thr}, iso_by_rep)

    rows = []
    for role in ("prod", "opp"):
        vals = iso[role]["values"]
        rows.append(_row(exp, f"isolated-{role}", {f"{role}_its": spread(vals),
                                                   f"{role}_nt": _nt_spread(vals, iso[role])}))
    for control in CONTROLS:
        vals = [thr[(control, r)]["prod"] for r in range(args.reps) if (control, r) in thr]
        if vals:
            rows.append(_row(exp, control, {"prod_its": spread(vals), "prod_nt": _nt_spread(vals, iso["prod"]),
                                            "prod_nt_paired": paired(control)}))
    for b in all_rows:
        if b == "isolated":
            continue
        if b in skipped:
            rows.append({"config": b, "status": "not run", "reason": skipped[b]})
            continue
        prod_its = [thr[(b, r)]["prod"] for r in range(args.reps) if (b, r) in thr]
        opp_its = [thr[(b, r)]["opp"] for r in range(args.reps) if (b, r) in thr]
        prod_nt, opp_nt = _nt_spread(prod_its, iso["prod"]), _nt_spread(opp_its, iso["opp"])
        metrics = {"prod_its": spread(prod_its), "opp_its": spread(opp_its), "prod_nt": prod_nt, "opp_nt": opp_nt,
                   "total_nt": _total_spread(prod_nt, opp_nt), "prod_nt_paired": paired(b)}
        if late:
            for role in ("prod", "opp"):
                metrics[f"{role}_nt_late"] = _nt_spread(
                    [thr_late[(b, r)][role] for r in range(args.reps) if (b, r) in thr_late], iso_late[role])
        rows.append(_row(exp, b, metrics))
    return {"workloads": {"production": prod, "opportunistic": opp}, "isolated_windows": k_iso, "late_s": late,
            "rows": rows}


# The rows of the production controls (_production_controls).
CONTROLS = ("isolated-prod-mps", "isolated-prod-gs")


def _production_controls(pool, shared, task, W):
    """Production alone, run as the shared rows run it: a control for what MPS or gpushare costs it
    without any sharing.
    - isolated-prod-mps (where any MPS row runs, MPS-prio alone included): production alone as an
      MPS client, to tell MPS's own cost or gain from sharing's. (Until 2026-11-27 only where the
      plain mps row ran: call 57 skipped that row, as every call of record since §4o has, and lost
      this control.)
    - isolated-prod-gs (where a gpushare row runs): production alone under the shim, registered with
      the first gpushare row's daemon (its opportunistic worker idle), so that what the shim and the
      daemon cost production is told from what sharing costs it. On the H100, S1b's production
      ranged 0.79 to 1.03 of its isolated speed from one call to the next with the budget running
      beside at no measured cost; without this control the two could not be told apart."""
    units = []
    if any(b.startswith("mps") for b in shared):  # the mps-prod worker runs (baselines.worker_specs)
        units.append(Unit(CONTROLS[0], lambda rep: [Placement(pool.get("mps-prod"), [dict(task, job=0)],
                                                              tags=["prod"])], W))
    gs_rows = [b for b in shared if b.startswith("gpushare:")]
    if gs_rows:
        first = gs_rows[0].split(":", 1)[1]
        units.append(Unit(CONTROLS[1], lambda rep: [Placement(pool.get(f"gs-{first}-prod"),
                                                             [dict(task, job=0)], tags=["prod"])], W))
    return units


def paired_ratios(row_by_rep, iso_by_rep):
    """A row's production rate over the isolated one of the same repetition, for each repetition
    that has both, in repetition order. The repetitions are interleaved, so a host whose speed
    drifts between them (a launch-bound server's isolated runs spread 111-226 it/s within one call
    on the H100, 2026-11-27) moves a repetition's isolated run and its shared rows alike, where the
    median of every isolated run does not. (Also tools/bench/per_rep.py.)"""
    return [rate / iso_by_rep[r] for r, rate in sorted(row_by_rep.items()) if iso_by_rep.get(r)]


def _paired(row_by_rep, iso_by_rep):
    """The spread of paired_ratios."""
    return spread(paired_ratios(row_by_rep, iso_by_rep))


def _iso_name(role, k):
    return f"isolated-{role}" if k == 0 else f"isolated-{role}#{k + 1}"


def _pooled_isolated(thr, role, reps, k_iso):
    """Every isolated window of the run for `role`: the values, their median, min and max."""
    vals = [thr[(_iso_name(role, k), r)][role] for r in range(reps) for k in range(k_iso)
            if (_iso_name(role, k), r) in thr]
    sp = spread(vals) or {"median": float("nan"), "min": float("nan"), "max": float("nan")}
    return {"values": vals, **sp}


def _nt_spread(its, iso):
    """NT = it/s over the isolated median; its range carries both the shared windows' spread and
    the isolated windows' (the denominator is as uncertain as any numerator): [min / iso max,
    max / iso min]."""
    sp = spread(its)
    if not sp or not iso.get("median") or iso["median"] != iso["median"]:
        return None
    return {"median": sp["median"] / iso["median"], "min": sp["min"] / iso["max"],
            "max": sp["max"] / iso["min"], "n": sp["n"]}


def run_s2(exp):
    args, pool, W = exp.args, exp.pool, exp.args.window
    prod, opp, all_rows, shared, skipped, gs = _setup(exp, "S2")
    # Solo capacity: the median of a few closed-loop windows. A single window proved too noisy on
    # the H100 (resnet50 b8 inference read 184 to 285 requests/s from one window to the next),
    # which can turn "70 %" into overload.
    caps = []
    for i in range(args.capacity_windows):
        res = exp.measure(Unit("capacity", lambda rep: bl.isolated(pool, "prod", _closed(W)), W), rep=-1 - i)
        if res is not None:
            caps.append(throughput(res["prod"], W, W))
    if not caps:
        reason = f"solo capacity could not be measured: {exp.why_missing('capacity')}"
        return {"workloads": {"production": prod, "opportunistic": opp},
                "rows": [{"config": b, "status": "not run", "reason": reason} for b in all_rows]}
    capacity = spread(caps)["median"]
    loads = args.loads

    def poisson(load, rep):
        # The same arrivals for every configuration of one (load, repetition): a fair comparison.
        return {"mode": "poisson", "start": 0.0, "end": W, "rate": load * capacity,
                "seed": 7919 * rep + int(load * 1000), "drain_s": 2.0}

    units = [Unit("isolated-opp", lambda rep: bl.isolated(pool, "opp", _closed(W)), W)]
    for load in loads:
        units.append(Unit(f"isolated-prod@{load}", lambda rep, load=load: bl.isolated(pool, "prod", poisson(load, rep)), W))
        units += [Unit(f"{b}@{load}", lambda rep, b=b, load=load: bl.placements(pool, b, poisson(load, rep), _closed(W), gs), W)
                  for b in shared]
    got = {}

    def keep(unit, rep, res):
        got[(unit.name, rep)] = res

    exp.run_reps(units, args.reps, keep)
    iso_opp = {r: throughput(got[("isolated-opp", r)]["opp"], W, W) for r in range(args.reps) if ("isolated-opp", r) in got}
    iso_opp_med = spread(list(iso_opp.values()))
    rows = [_row(exp, "isolated-opp", {"opp_its": iso_opp_med})]
    for load in loads:
        for b in ["isolated-prod"] + [x for x in all_rows if x != "isolated"]:
            name = f"{b}@{load}"
            if b in skipped:
                rows.append({"config": name, "load": load, "status": "not run", "reason": skipped[b]})
                continue
            per = {k: [] for k in ("p50_ms", "p95_ms", "p99_ms", "mean_ms", "served", "opp_nt")}
            for r in range(args.reps):
                if (name, r) not in got:
                    continue
                res = got[(name, r)]["prod"]
                lat = [x * 1000 for x in res["latencies"]]
                if lat:
                    for q in (50, 95, 99):
                        per[f"p{q}_ms"].append(percentile(lat, q))
                    per["mean_ms"].append(sum(lat) / len(lat))
                per["served"].append(len(lat) / max(1, res["arrivals"]))
                if "opp" in got[(name, r)] and iso_opp:
                    base = iso_opp.get(r, iso_opp_med["median"])
                    per["opp_nt"].append(throughput(got[(name, r)]["opp"], W, W) / base)
            row = _row(exp, name, {k: spread(v) for k, v in per.items()})
            row["load"] = load
            rows.append(row)
    return {"workloads": {"production": prod, "opportunistic": opp},
            "capacity_rps": capacity, "capacity_windows_rps": caps, "loads": loads, "rows": rows}


def _paired_nt(got, row, reps, window):
    """S5: production's NT in each repetition against the isolated run of the same repetition,
    over the whole window (_paired)."""
    def rates(name):
        return {r: throughput_from(got[(name, r)]["prod"], 0, window) for r in range(reps) if (name, r) in got}
    return _paired(rates(row), rates("isolated-prod"))


def run_s5(exp):
    args, pool, W = exp.args, exp.pool, exp.args.window
    prod, opp, all_rows, shared, skipped, gs = _setup(exp, "S5")
    on_s, off_s, bin_s = args.on_s, args.off_s, args.bin_s
    onoff = {"mode": "onoff", "start": 0.0, "end": W, "on_s": on_s, "off_s": off_s}
    units = [Unit("isolated-opp", lambda rep: bl.isolated(pool, "opp", _closed(W)), W),
             Unit("isolated-prod", lambda rep: bl.isolated(pool, "prod", onoff), W)]
    # --prod-controls: production's on/off alone as an MPS client and under the shim too (S1 runs
    # them always; here they cost two more windows a repetition). On the H100 a launch-bound
    # mobilenet_v2 b16 production kept 0.843 beside the budget, and what MPS or the shim cost it
    # alone could only be measured in another call (2026-11-27, calls 51 and 54).
    if getattr(args, "prod_controls", False):
        units += _production_controls(pool, shared, onoff, W)
    units += [Unit(b, lambda rep, b=b: bl.placements(pool, b, onoff, _closed(W), gs), W) for b in shared]
    got = {}
    exp.run_reps(units, args.reps, lambda u, r, res: got.__setitem__((u.name, r), res))
    iso_opp = spread([throughput(got[("isolated-opp", r)]["opp"], W, W) for r in range(args.reps)
                      if ("isolated-opp", r) in got])
    # --late-s: the same measures over the window's later whole on/off periods only, so that a
    # policy's learning at the start of each (fresh) run can be told from how it shares afterwards.
    period = on_s + off_s
    late = period * int(max(0.0, getattr(args, "late_s", 0.0)) // period) if W >= 2 * period else 0.0
    late = late if late < W - period + 1e-9 else 0.0
    spans = {"": 0.0, "_late": late} if late else {"": 0.0}  # column suffix -> start of the span
    iso_prod = {suffix: spread([throughput_from(got[("isolated-prod", r)]["prod"], start, W) for r in range(args.reps)
                                if ("isolated-prod", r) in got]) for suffix, start in spans.items()}
    rows = [_row(exp, "isolated-opp", {"opp_its": iso_opp}), _row(exp, "isolated-prod", {"prod_its": iso_prod[""]})]
    for control in CONTROLS:
        runs = [got[(control, r)]["prod"] for r in range(args.reps) if (control, r) in got]
        if runs and iso_prod[""]:
            rows.append(_row(exp, control, {"prod_its": spread([throughput_from(res, 0, W) for res in runs])} | {
                f"prod_nt{suffix}": spread([throughput_from(res, start, W) / iso_prod[suffix]["median"] for res in runs])
                for suffix, start in spans.items()} | {"prod_nt_paired": _paired_nt(got, control, args.reps, W)}))
    profiles = {}
    for b in all_rows:
        if b == "isolated":
            continue
        if b in skipped:
            rows.append({"config": b, "status": "not run", "reason": skipped[b]})
            continue
        if W < on_s + off_s:
            rows.append({"config": b, "status": "not run", "reason": "window shorter than one on/off period"})
            continue
        per = {}
        for r in range(args.reps):
            if (b, r) not in got or not iso_opp or not iso_prod[""]:
                continue
            res = got[(b, r)]
            per.setdefault("prod_its", []).append(throughput(res["prod"], W, W))
            per.setdefault("opp_its", []).append(throughput(res["opp"], W, W))
            for suffix, start in spans.items():
                prof = fold(res["opp"]["completions"], W, period, bin_s, start=start)
                if not suffix:
                    profiles.setdefault(b, []).append(prof)
                stats = reaction(prof, on_s, bin_s, iso_opp["median"])
                stats["prod_nt"] = throughput_from(res["prod"], start, W) / iso_prod[suffix]["median"]
                for k, v in stats.items():
                    per.setdefault(k + suffix, []).append(v)
        rows.append(_row(exp, b, {k: spread(v) for k, v in per.items()} | {"prod_nt_paired": _paired_nt(got, b, args.reps, W)}))
    return {"workloads": {"production": prod, "opportunistic": opp}, "on_s": on_s, "off_s": off_s,
            "bin_s": bin_s, "late_s": late, "profiles": profiles, "rows": rows}


def fold(completions, window, period, bin_s, start=0.0):
    """The opportunistic job's rate (it/s) against time since the production on-edge, folded
    over every whole period of the window from `start` (a whole number of periods) on."""
    n_bins = int(round(period / bin_s))
    periods = int((window - start) // period)
    counts = [0] * n_bins
    for c in completions:
        if start <= c < start + periods * period:
            counts[min(n_bins - 1, int(((c - start) % period) / bin_s))] += 1
    return [n / (max(1, periods) * bin_s) for n in counts]


def reaction(profile, on_s, bin_s, iso_rate):
    """Give-way and take-back times: first bin past the midpoint between the on and off levels."""
    on_bins = int(round(on_s / bin_s))
    on_part, off_part = profile[:on_bins], profile[on_bins:]
    on_level = sum(on_part[len(on_part) // 2:]) / max(1, len(on_part) - len(on_part) // 2)
    off_level = sum(off_part[len(off_part) // 2:]) / max(1, len(off_part) - len(off_part) // 2)
    out = {"opp_nt_on": on_level / iso_rate, "opp_nt_off": off_level / iso_rate,
           "give_way_ms": None, "take_back_ms": None}
    if off_level - on_level < 0.1 * iso_rate:  # the job hardly gives way at all: no edge to time
        return out
    mid = (on_level + off_level) / 2
    out["give_way_ms"] = next(((i + 1) * bin_s * 1000 for i, v in enumerate(on_part) if v <= mid), None)
    out["take_back_ms"] = next(((i + 1) * bin_s * 1000 for i, v in enumerate(off_part) if v >= mid), None)
    return out


def _total_spread(prod_nt, opp_nt):
    """Total NT: the sum of the two, with the two ranges added (each carries its denominator's)."""
    if not prod_nt or not opp_nt:
        return None
    return {k: prod_nt[k] + opp_nt[k] for k in ("median", "min", "max")} | {"n": min(prod_nt["n"], opp_nt["n"])}


def _row(exp, config, metrics):
    n = max((m["n"] for m in metrics.values() if m), default=0)
    if n == 0:
        return {"config": config, "status": "failed", "reason": exp.why_missing(config)}
    return {"config": config, "status": "ok", "reps": n, **metrics}
