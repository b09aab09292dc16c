"""PyTorch add_ loop: kernel launches per second (launch-bound). Prints one JSON line."""
import json
import time

import torch

x = torch.zeros(1, device="cuda")
for _ in range(2000):
    x.add_(1.0)
torch.cuda.synchronize()
n = 200000
start = time.perf_counter()
for _ in range(n):
    x.add_(1.0)
torch.cuda.synchronize()
elapsed = time.perf_counter() - start
print(json.dumps({"launches_per_s": n / elapsed}))
