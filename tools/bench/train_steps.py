#!/usr/bin/env python3
"""One deterministic training run for S4: N steps of a torchvision model on seeded synthetic data,
then a SHA-256 of every weight and buffer, so that two runs with the same seed can be compared bit
for bit (nothing lost in a swap).

  python3 tools/bench/train_steps.py --seed 1 --steps 200 --batch 96 --out result.json

Prints one line per step ("step I T", T in seconds since the first step began) so that a driver
can tell when the job holds its working set. Writes the result JSON at the end; an out-of-memory
error is a result too ("outcome": "oom", with the step it happened in), not a crash.
"""

import argparse
import hashlib
import json
import os
import sys
import time


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=96)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memory-cap-gib", type=float,
                    help="a static share of the card through torch.cuda.set_per_process_memory_fraction")
    ap.add_argument("--stop-file", help="end after the step during which this file appears (a job that runs "
                    "as long as others do: its step count then varies, so its weights are not comparable)")
    ap.add_argument("--step-sleep-ms", type=float, default=0,
                    help="CPU time between steps (a job that leaves the GPU idle part of the time)")
    ap.add_argument("--out", required=True)
    return ap.parse_args(argv)


def weights_digest(model, torch):
    """SHA-256 over every parameter and buffer (batch-norm statistics too), by name."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def main(argv):
    args = parse_args(argv)
    # Deterministic algorithms, as the issue asks: the same seed must give the same weights.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    result = {"seed": args.seed, "steps": args.steps, "batch": args.batch, "model": args.model,
              "pid": os.getpid(), "outcome": "started", "step_end_s": []}
    dev = torch.device("cuda")
    free, total = torch.cuda.mem_get_info()
    result["mem_get_info_at_start"] = {"free": free, "total": total}
    if args.memory_cap_gib:
        torch.cuda.set_per_process_memory_fraction(min(1.0, args.memory_cap_gib * 2**30 / total))
    step = -1
    t0 = None
    try:
        torch.manual_seed(args.seed)
        model = getattr(torchvision.models, args.model)(weights=None).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss()
        gen = torch.Generator(device=dev)
        t0 = time.time()
        for step in range(args.steps):
            gen.manual_seed(args.seed * 1_000_003 + step)
            x = torch.randn(args.batch, 3, 224, 224, device=dev, generator=gen)
            y = torch.randint(0, 1000, (args.batch,), device=dev, generator=gen)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            t = time.time() - t0
            result["step_end_s"].append(round(t, 5))
            print(f"step {step} {t:.4f}", flush=True)
            if args.step_sleep_ms:
                time.sleep(args.step_sleep_ms / 1000)
            if args.stop_file and os.path.exists(args.stop_file):
                break
        result["outcome"] = "completed"
        result["steps"] = len(result["step_end_s"])
        result["loss"] = float(loss.item())
        result["weights_sha256"] = weights_digest(model, torch)
    except torch.OutOfMemoryError as e:
        result.update(outcome="oom", failed_step=step, error=str(e).splitlines()[0][:300])
    except RuntimeError as e:  # a CUDA error other than OOM: say which
        result.update(outcome="error", failed_step=step, error=str(e).splitlines()[0][:300])
    result["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    result["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    result["wall_s"] = round(time.time() - t0, 4) if t0 else None
    with open(args.out, "w") as f:
        json.dump(result, f)
    print(f"outcome {result['outcome']}", flush=True)
    return 0 if result["outcome"] == "completed" else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
