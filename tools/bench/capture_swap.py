"""CUDA graph captures beside memory moves, on a real GPU: does a swap break the program's capture?

An opportunistic PyTorch job captures a CUDA graph over and over (torch.cuda.graph: a chain of
small matmuls, then one replay) while it holds OPP_GIB of memory; a production job allocates
PROD_GIB, holds it, frees it and empties its cache, again and again. gpushared runs with
`memory.capacity` CAPACITY_GIB < OPP_GIB + PROD_GIB and `oversubscribe`, so every production
allocation moves the opportunistic job's memory to host and every free brings it back: each move
synchronises the job's context, which invalidates a capture in progress on another thread. The
capacity is far below the card's: nothing asks the hardware for more than it has.

Rows (one daemon each, fresh): `no-shim` (both jobs plain, no capacity: the control; every capture
must succeed), then one row per shim given (`--shim LABEL=PATH`), all on the same daemon binary.
A row reports the captures that succeeded and failed (with the first errors), production's
allocations and how long each waited for its room, and whether the opportunistic job's held
memory kept its contents.

  python3 tools/bench/capture_swap.py --daemon 'bin/gpushared --config {config}' \\
      --shim old=lib/libgpushare-old.so --shim new=lib/libgpushare.so --out OUT
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 2**30


def opp_role(args):
    import torch
    dev = torch.device("cuda")
    # Held memory with known contents: a swap must bring it back intact.
    held = [torch.full((GIB // 4,), float(i + 1), device=dev) for i in range(int(args.opp_gib))]
    w = torch.randn(512, 512, device=dev) / 512 ** 0.5
    x = torch.randn(512, 512, device=dev)

    def body(t):
        for _ in range(args.ops):
            t = torch.relu(t @ w)
        return t

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        body(x)  # warm-up off the default stream, as torch.cuda.graph asks
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    ok, failed, errors, capture_s = 0, 0, [], []
    start = time.time()
    while time.time() - start < args.seconds:
        graph = torch.cuda.CUDAGraph()
        t0 = time.perf_counter()
        try:
            with torch.cuda.graph(graph):
                body(x)
            capture_s.append(time.perf_counter() - t0)
            graph.replay()
            torch.cuda.synchronize()
            ok += 1
        except Exception as e:  # the measurement: count it, say what it was, go on
            failed += 1
            if len(errors) < 5:
                errors.append(f"{time.time() - start:.2f} s: {type(e).__name__}: {str(e)[:240]}")
            try:
                torch.cuda.synchronize()
            except Exception as after:
                errors.append(f"the job cannot go on: {str(after)[:240]}")
                break
        del graph
    intact = all(bool((h == float(i + 1)).all()) for i, h in enumerate(held))
    return {"captures_ok": ok, "captures_failed": failed, "errors": errors, "held_intact": intact,
            "capture_ms_median": round(statistics.median(capture_s) * 1e3, 2) if capture_s else None,
            "seconds": round(time.time() - start, 2)}


def prod_role(args):
    import torch
    torch.zeros(1, device="cuda")
    waits, start = [], time.time()
    n = int(args.prod_gib * GIB)
    while time.time() - start < args.seconds:
        t0 = time.perf_counter()
        big = torch.empty(n, dtype=torch.uint8, device="cuda")
        big.fill_(1)
        torch.cuda.synchronize()
        waits.append(time.perf_counter() - t0)
        time.sleep(args.hold_s)
        del big
        torch.cuda.empty_cache()  # the free reaches the driver, and the daemon
        time.sleep(args.gap_s)
    return {"allocations": len(waits), "alloc_ms": [round(w * 1e3, 1) for w in waits]}


def summarise(label, opp, prod):
    """One row from the two jobs' results (a job that died has {"outcome": ...} instead)."""
    row = {"config": label}
    row.update({k: opp.get(k) for k in ("captures_ok", "captures_failed", "held_intact",
                                        "capture_ms_median", "errors", "outcome")})
    waits = prod.get("alloc_ms") or []
    row["prod_allocations"] = prod.get("allocations", 0)
    row["prod_alloc_ms_median"] = statistics.median(waits) if waits else None
    row["prod_alloc_ms_max"] = max(waits) if waits else None
    if "outcome" in prod:
        row["prod_outcome"] = prod["outcome"]
    return row


def run_job(role, args, env, log_path, out_path):
    cmd = [sys.executable, os.path.abspath(__file__), "--role", role, "--result", out_path]
    for k in ("opp_gib", "prod_gib", "seconds", "ops", "hold_s", "gap_s"):
        cmd += [f"--{k.replace('_', '-')}", str(getattr(args, k))]
    log = open(log_path, "w")
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log


def result_of(proc, log, out_path, timeout_s):
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
    try:
        with open(out_path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"outcome": f"no result (exit status {proc.returncode})"}


def row(label, args, env_opp, env_prod):
    paths = {r: (os.path.join(args.out, f"{label}-{r}.log"), os.path.join(args.out, f"{label}-{r}.json"))
             for r in ("opp", "prod")}
    opp, opp_log = run_job("opp", args, env_opp, *paths["opp"])
    time.sleep(args.head_start_s)  # the opportunistic job holds its memory first
    prod, prod_log = run_job("prod", args, env_prod, *paths["prod"])
    timeout = args.seconds + 120
    got_prod = result_of(prod, prod_log, paths["prod"][1], timeout)
    got_opp = result_of(opp, opp_log, paths["opp"][1], timeout)
    return summarise(label, got_opp, got_prod)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--role", choices=["opp", "prod"])
    p.add_argument("--result")
    p.add_argument("--daemon", help="gpushared command template with {config}")
    p.add_argument("--shim", action="append", default=[], help="LABEL=PATH, one row each")
    p.add_argument("--out", default="capture-swap")
    p.add_argument("--capacity-gib", type=float, default=8)
    p.add_argument("--opp-gib", type=float, default=4)
    p.add_argument("--prod-gib", type=float, default=5)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--ops", type=int, default=200, help="matmuls per captured graph")
    p.add_argument("--hold-s", type=float, default=0.5)
    p.add_argument("--gap-s", type=float, default=0.5)
    p.add_argument("--head-start-s", type=float, default=8)
    args = p.parse_args()
    if args.role:
        result = (opp_role if args.role == "opp" else prod_role)(args)
        with open(args.result, "w") as f:
            json.dump(result, f)
        return 0
    if args.capacity_gib >= args.opp_gib + args.prod_gib:
        p.error("--capacity-gib must be below --opp-gib + --prod-gib, or nothing ever moves")
    os.makedirs(args.out, exist_ok=True)
    sys.path.insert(0, HERE)
    from gpushare_hook import start_daemon, stop_daemon
    base = dict(os.environ, PYTHONUNBUFFERED="1")
    base.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # expandable segments are VMM: not swappable
    rows = [row("no-shim", args, base, base)]
    print(json.dumps(rows[-1]), flush=True)
    for spec in args.shim:
        label, _, path = spec.partition("=")
        sock = os.path.join(args.out, f"{label}.sock")
        config = {"socket": {"path": sock}, "production": [{"uid": os.getuid()}],
                  "policy": {"default": "none"}, "tick_ms": 50, "log_level": "debug",
                  "memory": {"capacity": f"{args.capacity_gib:g}G", "oversubscribe": True}}
        proc, error = start_daemon(args.daemon, config, os.path.join(args.out, f"{label}-gpushared.json"),
                                   os.path.join(args.out, f"{label}-gpushared.log"))
        if error:
            rows.append({"config": label, "status": "not run", "reason": error})
            stop_daemon(proc)
            continue
        try:
            def env(cls):
                return dict(base, LD_PRELOAD=os.path.abspath(path), GPUSHARE_SOCKET=sock,
                            GPUSHARE_PRIORITY=cls, GPUSHARE_JOB=f"{label}-{cls}", GPUSHARE_REQUIRE_DAEMON="1")
            rows.append(row(label, args, env("opportunistic"), env("production")))
        finally:
            stop_daemon(proc)
        print(json.dumps(rows[-1]), flush=True)
    with open(os.path.join(args.out, "capture_swap.json"), "w") as f:
        json.dump({"args": {k: v for k, v in vars(args).items() if k not in ("role", "result")},
                   "rows": rows}, f, indent=1)
    print(f"{'config':<10} {'captures ok':>11} {'failed':>7} {'held intact':>11} {'prod allocs':>11} "
          f"{'alloc ms med/max':>17}")
    for r in rows:
        print(f"{r['config']:<10} {r.get('captures_ok')!s:>11} {r.get('captures_failed')!s:>7} "
              f"{r.get('held_intact')!s:>11} {r.get('prod_allocations')!s:>11} "
              f"{r.get('prod_alloc_ms_median')!s:>8}/{r.get('prod_alloc_ms_max')!s:<8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
