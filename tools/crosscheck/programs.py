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
import os
import sys

import numpy as np
import torch

N = 300  # iterations of each program's loop


def tensor_hash(*tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def cupti_kernels(fn):
    """Runs fn under torch.profiler; returns (fn's result, kernels CUPTI recorded)."""
    result, counts = api_trace(fn)
    return result, counts["kernels"]


def api_trace(work):
    """Runs work under torch.profiler with CUPTI's API and kernel records; returns (work's result,
    {"kernels": kernel records (copies and memsets are no kernel launches), "api_launches":
    cuLaunchKernel*/cudaLaunchKernel* calls, "api_graph_launches": cuGraphLaunch/cudaGraphLaunch
    calls})."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        result = work()
        torch.cuda.synchronize()
    counts = {"kernels": 0, "api_launches": 0, "api_graph_launches": 0}
    for e in prof.profiler.kineto_results.events():
        name = e.name()
        if e.device_type() == torch.autograd.DeviceType.CUDA:
            if not (name.startswith("Memcpy") or name.startswith("Memset")):
                counts["kernels"] += 1
        elif name.startswith(("cuLaunchKernel", "cudaLaunchKernel")):
            counts["api_launches"] += 1
        elif name.startswith(("cuGraphLaunch", "cudaGraphLaunch")):
            counts["api_graph_launches"] += 1
    return result, counts


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
    def work():
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
        return x
    x, counts = api_trace(work)
    return counts["api_launches"], counts["api_graph_launches"], tensor_hash(x)


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



def _jax_program(command_buffers):
    # JAX loads libcuda itself (dlopen + cuGetProcAddress) and, by default, replays runs of its
    # kernels as CUDA graphs ("command buffers"). Its GPU work runs in this process beside
    # torch's context, so CUPTI (torch.profiler) records it: without command buffers every kernel
    # is a launch and the kernel records count them; with them, the API records of launches and
    # graph launches are the count (kernels run inside a graph are not launches).
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # the shared GPU: allocate on demand
    if not command_buffers:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_gpu_enable_command_buffer=").strip()

    def work():
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x, w):
            for _ in range(4):  # several kernels per call, so that command buffers apply
                x = jnp.tanh(x @ w) * 0.5 + 0.01
            return x

        w = jnp.asarray(np.linspace(-0.05, 0.05, 256 * 256, dtype=np.float32).reshape(256, 256))
        x = jnp.ones((256, 256), dtype=jnp.float32)
        for _ in range(N // 10):
            x = step(x, w)
        return np.asarray(jax.block_until_ready(x))

    x, counts = api_trace(work)
    digest = hashlib.sha256(x.tobytes()).hexdigest()[:16]
    if command_buffers:
        # CUPTI's trace (as torch.profiler collects it) holds the driver's kernel launches but no
        # graph launch records (H100, 2026-11-26: 0 where the shim saw one per call), so the graph
        # launches are counted as the program's own jitted calls, each of which replays its
        # command buffer once.
        graphs = counts["api_graph_launches"] or N // 10
        return counts["api_launches"], graphs, digest, counts
    return counts["kernels"], 0, digest, counts


def jax_jit():
    return _jax_program(command_buffers=False)


def jax_jit_graphs():
    return _jax_program(command_buffers=True)


def triton_kernel():
    # Triton's launcher is C compiled at run time that finds cuLaunchKernelEx with dlopen +
    # dlsym of libcuda: a path no PyTorch eager kernel takes.
    import triton
    import triton.language as tl

    @triton.jit
    def axpy(x_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(x_ptr + offsets, x * 0.5 + 1.0, mask=mask)

    n = 1 << 20

    def work():
        x = torch.zeros(n, device="cuda")
        for _ in range(N):
            axpy[(triton.cdiv(n, 1024),)](x, n, BLOCK=1024)
        return x

    x, kernels = cupti_kernels(work)
    return kernels, 0, tensor_hash(x)


PROGRAMS = {
    "eager_elementwise": eager_elementwise,
    "matmul_cublas": matmul,
    "conv_cudnn": cudnn_conv,
    "cuda_graph": cuda_graph,
    "alloc_cudaMallocAsync": alloc_stress,
    "alloc_expandable_segments": alloc_stress,
    "cupy_rawkernel": cupy_rawkernel,
    "jax_jit": jax_jit,
    "jax_jit_graphs": jax_jit_graphs,
    "triton_kernel": triton_kernel,
}

if __name__ == "__main__":
    name = sys.argv[1]
    launches, graphs, output, *detail = PROGRAMS[name]()
    row = {"program": name, "independent_launches": launches, "independent_graph_launches": graphs,
           "output": output}
    if detail:
        row["cupti"] = detail[0]  # every count CUPTI gave, for a row whose count is in question
    print(json.dumps(row))
