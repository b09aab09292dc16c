#!/usr/bin/env bash
# PyTorch add_ launch rate without and with the shim, alternating runs in one command. Usage: launch_rate_gpu.sh <libgpushare.so> [runs]
set -uo pipefail
shim=$(realpath "$1"); runs=${2:-10}; here=$(dirname "$0")
for i in $(seq "$runs"); do
  echo "{\"shim\": false, $(python3 "$here/launch_rate.py" | sed 's/^{//')"
  echo "{\"shim\": true, $(LD_PRELOAD="$shim" GPUSHARE_QUIET=1 python3 "$here/launch_rate.py" 2>/dev/null | sed 's/^{//')"
done | python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin]
off = [r["launches_per_s"] for r in rows if not r["shim"]]
on = [r["launches_per_s"] for r in rows if r["shim"]]
print("without:", " ".join(f"{x:,.0f}" for x in off))
print("with:   ", " ".join(f"{x:,.0f}" for x in on))
m_off, m_on = statistics.median(off), statistics.median(on)
print(f"median without {m_off:,.0f}/s, with {m_on:,.0f}/s, ratio {m_on/m_off:.3f}")'
