"""The GPU cross-check programs.

Each program does its GPU work, prints one JSON line to stdout:
  {"program": ..., "independent_launches": N, "independent_graph_launches": G, "output": "<hash>"}
where the independent count comes from torch.profiler (CUPTI) for PyTorch programs and from the
program's own loop count where no profiler applies, and "output" hashes the result's bytes, so a
run with the shim can be compared bit for bit with a run without it.

Usage: python3 programs.py <name>     (names: see PROGRAMS)
"""
import hashlib
import json
import sys

import torch

N = 300  # iterations of each program's loop


def tensor_hash(*tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def cupti_kernels(fn):
    """Runs fn under torch.profiler; returns (fn's result, kernels CUPTI recorded)."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        result = fn()
        torch.cuda.synchronize()
    kernels = 0
    for e in prof.profiler.kineto_results.events():
        if e.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        name = e.name()
        if name.startswith("Memcpy") or name.startswith("Memset"):
            continue  # copies and memsets are no kernel launches
        kernels += 1
    return result, kernels


def eager_elementwise():
    def work():
        x = torch.zeros(1 << 20, device="cuda")
        for i in range(N):
            x.add_(1.0).mul_(0.999)
        return x
    x, kernels = cupti_kernels(work)
    return kernels, 0, tensor_hash(x)


def matmul():
    def work():
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(1024, 1024, device="cuda", generator=g)
        b = torch.randn(1024, 1024, device="cuda", generator=g)
        for i in range(N // 10):
            a = torch.tanh(a @ b)
        return a
    a, kernels = cupti_kernels(work)
    return kernels, 0, tensor_hash(a)


def cudnn_conv():
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    def work():
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(8, 64, 56, 56, device="cuda", generator=g)
        w = torch.randn(64, 64, 3, 3, device="cuda", generator=g) * 0.05
        for i in range(N // 10):
            x = torch.nn.functional.conv2d(x, w, padding=1).relu_()
        return x
    x, kernels = cupti_kernels(work)
    return kernels, 0, tensor_hash(x)


def cuda_graph():
    # Kernels captured into a graph are launched (cuLaunchKernel under stream capture) but never
    # run as such, so CUPTI's kernel records cannot count them. The independent count here is
    # CUPTI's trace of the launch API calls (cudaLaunchKernel*/cuLaunchKernel*) and of
    # cudaGraphLaunch, over the whole program: warm-up, capture and replays.
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        x = torch.zeros(1 << 16, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                x.add_(1.0)  # warm-up on a side stream, as the PyTorch docs recommend
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(10):
                x.mul_(1.001).add_(1.0)
        for _ in range(N // 10):
            graph.replay()
        torch.cuda.synchronize()
    launches = graphs = 0
    for e in prof.profiler.kineto_results.events():
        if e.device_type() == torch.autograd.DeviceType.CUDA:
            continue
        name = e.name()
        if name.startswith("cudaLaunchKernel") or name.startswith("cuLaunchKernel"):
            launches += 1
        elif name.startswith("cudaGraphLaunch"):
            graphs += 1
    return launches, graphs, tensor_hash(x)


def alloc_stress():
    # Used with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync or expandable_segments:True.
    def work():
        out = torch.zeros(1, device="cuda")
        for i in range(N // 10):
            t = torch.ones((1 << 18) * (1 + i % 7), device="cuda")
            out += t.sum()
            del t
        return out
    out, kernels = cupti_kernels(work)
    return kernels, 0, tensor_hash(out)


def cupy_rawkernel():
    import cupy
    kernel = cupy.RawKernel(r'''
    extern "C" __global__ void axpy(float a, float* x, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) x[i] = a * x[i] + 1.0f;
    }''', "axpy")
    n = 1 << 20
    x = cupy.zeros(n, dtype=cupy.float32)
    for i in range(N):
        kernel(((n + 255) // 256,), (256,), (cupy.float32(0.5), x, cupy.int32(n)))
    cupy.cuda.runtime.deviceSynchronize()
    h = hashlib.sha256(cupy.asnumpy(x).tobytes()).hexdigest()[:16]
    return N, 0, h  # independent count: the loop's own launches (no fills: cupy.zeros is a memset)


PROGRAMS = {
    "eager_elementwise": eager_elementwise,
    "matmul_cublas": matmul,
    "conv_cudnn": cudnn_conv,
    "cuda_graph": cuda_graph,
    "alloc_cudaMallocAsync": alloc_stress,
    "alloc_expandable_segments": alloc_stress,
    "cupy_rawkernel": cupy_rawkernel,
}

if __name__ == "__main__":
    name = sys.argv[1]
    launches, graphs, output = PROGRAMS[name]()
    print(json.dumps({"program": name, "independent_launches": launches,
                      "independent_graph_launches": graphs, "output": output}))
