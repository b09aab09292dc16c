#!/usr/bin/env bash
# GPU cross-check of the interception and the PyTorch launch-rate overhead.
# Run on the GPU machine from the repository root:
#   tools/crosscheck/run_gpu.sh <path/to/libgpushare.so> <out-dir>
# For each program: run without the shim, run with it (GPUSHARE_REPORT), and compare the shim's
# launch count with the independent count, and the outputs bit for bit.
set -uo pipefail
shim=$(realpath "$1"); out=$2; mkdir -p "$out"
here=$(dirname "$0")
export PYTHONUNBUFFERED=1
results=$out/crosscheck.jsonl; : >"$results"

run_pair() {  # name, env-assignments..., -- command...
  local name=$1; shift
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local plain shimmed report=$out/report-$name.json
  plain=$(env "${envs[@]}" "$@" 2>"$out/$name.plain.err" | tail -n1)
  shimmed=$(env "${envs[@]}" LD_PRELOAD="$shim" GPUSHARE_REPORT="$report" "$@" 2>"$out/$name.shim.err" | tail -n1)
  python3 - "$name" "$plain" "$shimmed" "$report" >>"$results" <<'PY'
import json, sys
name, plain, shimmed, report = sys.argv[1:5]
row = {"program": name}
try:
    p, s, r = json.loads(plain), json.loads(shimmed), json.load(open(report))
    row.update(independent=s["independent_launches"], shim=r["launches"]["total"],
               independent_graphs=s["independent_graph_launches"], shim_graphs=r["graph_launches"]["total"],
               output_identical=p["output"] == s["output"],
               allocs=r["allocations"]["count"],
               alloc_paths={k: v for k, v in r["calls"].items() if k.startswith("cuMem") and v},
               unmatched=r["interception"]["proc_address_unmatched"],
               by_entry_point={k: v for k, v in r["launches"]["by_entry_point"].items() if v})
    row["equal"] = row["independent"] == row["shim"] and row["independent_graphs"] == row["shim_graphs"]
    if "cupti" in s:
        row["cupti"] = s["cupti"]
except Exception as e:  # a broken run is a row that says why
    row["error"] = f"{type(e).__name__}: {e}; plain={plain[:200]!r} shim={shimmed[:200]!r}"
print(json.dumps(row))
PY
}

for p in eager_elementwise matmul_cublas conv_cudnn cuda_graph cupy_rawkernel triton_kernel jax_jit jax_jit_graphs; do
  run_pair "$p" -- python3 "$here/programs.py" "$p"
done
run_pair alloc_cudaMallocAsync PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- \
  python3 "$here/programs.py" alloc_cudaMallocAsync
run_pair alloc_expandable_segments PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- \
  python3 "$here/programs.py" alloc_expandable_segments

build=$(mktemp -d)
if nvcc -O2 -cudart shared -o "$build/rt_dynamic" "$here/runtime_program.cu" 2>"$out/nvcc.err" &&
   nvcc -O2 -cudart static -o "$build/rt_static" "$here/runtime_program.cu" 2>>"$out/nvcc.err"; then
  run_pair runtime_dynamic_cudart -- "$build/rt_dynamic" runtime_dynamic_cudart
  run_pair runtime_static_cudart -- "$build/rt_static" runtime_static_cudart
else
  echo '{"program": "runtime_*_cudart", "error": "nvcc failed, see nvcc.err"}' >>"$results"
fi

# Launch-rate overhead: alternate runs without and with the shim (RATE_RUNS pairs, default 10).
rates=$out/launch_rate.jsonl; : >"$rates"
for _ in $(seq "${RATE_RUNS:-10}"); do
  echo "{\"shim\": false, $(python3 "$here/launch_rate.py" | sed 's/^{//')" >>"$rates"
  echo "{\"shim\": true, $(LD_PRELOAD="$shim" python3 "$here/launch_rate.py" | sed 's/^{//')" >>"$rates"
done

python3 - "$results" "$rates" <<'PY' | tee "$out/crosscheck.md"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| program | independent launches | shim launches | graph launches (indep./shim) | equal | output identical | allocation calls seen |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    if "error" in r:
        print(f"| {r['program']} | error: {r['error']} | | | no | | |"); continue
    print(f"| {r['program']} | {r['independent']} | {r['shim']} | {r['independent_graphs']}/{r['shim_graphs']} | "
          f"{'yes' if r['equal'] else 'NO'} | {'yes' if r['output_identical'] else 'NO'} | "
          f"{', '.join(f'{k} {v}' for k, v in r['alloc_paths'].items())} |")
for r in rows:
    if "cupti" in r:
        print(f"\n{r['program']}: CUPTI counted {r['cupti']}; the shim's launches by entry point "
              f"{r.get('by_entry_point')}")
rates = [json.loads(l) for l in open(sys.argv[2])]
if not rates:
    sys.exit(0)
off = [r["launches_per_s"] for r in rates if not r["shim"]]
on = [r["launches_per_s"] for r in rates if r["shim"]]
print()
print(f"PyTorch add_ launch rate, median of 10 alternating runs: without shim {statistics.median(off):,.0f}/s "
      f"(min {min(off):,.0f}, max {max(off):,.0f}); with shim {statistics.median(on):,.0f}/s "
      f"(min {min(on):,.0f}, max {max(on):,.0f}); ratio {statistics.median(on)/statistics.median(off):.3f}")
PY
