#!/bin/bash
# Call 1 (2026-12-07, session 32): the memory path of this session's shim and daemon on the H100
# (S4: every row, the isolated denominators, weights against the isolated runs), then the
# interception cross-check of the head's shim (PyTorch, cuBLAS, cuDNN, graphs, CuPy, Triton, JAX,
# CUDA C++: launches against CUPTI, outputs bit for bit). Results archived after each step.
set -u
cd "$(dirname "$0")/.." || exit 1
tar xJf .gpu/carry.tar.xz
W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name,uuid,driver_version,memory.used,memory.total,clocks.sm --format=csv | tee $W/gpus.csv
pack() { tar czf "$OUT/results.tgz" -C "$W" . ; }
L="LD_LIBRARY_PATH=$PWD/.carry/lib"
echo "=== S4 $(date -u +%T)"
timeout 280 python3 tools/bench/run.py --scenario S4 --out $W/s4 --capacity 16G --batch 96 --steps 200 \
  --shim .carry/libgpushare.so --gpushare-daemon "$L $PWD/.carry/bin/gpushared --config {config}" \
  --gpusharectl "$L $PWD/.carry/bin/gpusharectl" > $W/s4.log 2>&1
echo "rc=$? $(date -u +%T)"; pack
grep '^|' $W/s4/*.md 2>/dev/null | cut -c1-400
echo "=== crosscheck $(date -u +%T)"
RATE_RUNS=0 timeout 250 bash tools/crosscheck/run_gpu.sh .carry/libgpushare.so $W/crosscheck > $W/crosscheck.log 2>&1
echo "rc=$? $(date -u +%T)"; pack
cat $W/crosscheck/crosscheck.md 2>/dev/null | cut -c1-300
