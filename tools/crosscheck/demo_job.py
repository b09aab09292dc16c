"""A small PyTorch job for the daemon walk-through on the GPU: matmuls for --seconds, then prints
its iterations per second and the job class its shim's control block holds (read from this
process's own mapping of the block, as tests/daemon/daemon_probe.cpp does)."""
import argparse
import json
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=8)
ap.add_argument("--size", type=int, default=4096)
args = ap.parse_args()
a = torch.randn(args.size, args.size, device="cuda")
b = torch.randn(args.size, args.size, device="cuda")
torch.cuda.synchronize()
start, iterations = time.time(), 0
while time.time() - start < args.seconds:
    a = torch.tanh(a @ b)
    iterations += 1
    if iterations % 20 == 0:
        torch.cuda.synchronize()
torch.cuda.synchronize()
print(json.dumps({"iterations_per_s": iterations / (time.time() - start)}))
