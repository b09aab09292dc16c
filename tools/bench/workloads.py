"""Workloads of the benchmark harness: random weights, synthetic data, nothing downloaded.

A workload is named `<model>_<train|infer>_b<batch>[_p<pause ms>][_g]`, for example
`resnet50_train_b32`, `resnet50_infer_b8` or `resnet50_train_b8_p20` (a production job that
leaves the GPU idle 20 ms per iteration, as a job does while it loads data without prefetching).
`_g`: each iteration is one CUDA graph, captured once and replayed (`torch.cuda.CUDAGraph`), as
inference servers and `torch.compile(mode="reduce-overhead")` run: the driver sees one
`cuGraphLaunch` an iteration instead of hundreds of kernel launches.

Models: resnet50 and mobilenet_v2 (torchvision, 224x224 images, 1000 classes), transformer (a
6-layer encoder, d=512, 8 heads, sequence 128, vocabulary 8000), and `sleep`, which uses no GPU
at all and exists so the harness's own logic can be tried on a machine without one.

torch is imported lazily so that the controller, which must never create a CUDA context, can
import this module to validate names.
"""

import re
import time
from dataclasses import dataclass

MODELS = ("resnet50", "mobilenet_v2", "transformer", "sleep")
_NAME = re.compile(
    r"^(?P<model>[a-z0-9_]+?)_(?P<kind>train|infer)_b(?P<batch>\d+)(?:_p(?P<pause>\d+))?(?P<graph>_g)?$")

# The transformer's shape ("about 6 layers, d=512").
TRANSFORMER_LAYERS = 6
TRANSFORMER_DIM = 512
TRANSFORMER_HEADS = 8
TRANSFORMER_SEQ = 128
TRANSFORMER_VOCAB = 8000

# A `sleep` iteration's length: long enough that Python's sleep is accurate to a few percent.
SLEEP_STEP_S = 0.010


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    model: str
    training: bool
    batch: int
    pause_ms: int  # CPU-side pause after each iteration, GPU idle meanwhile
    graph: bool = False  # each iteration one CUDA graph replay

    @property
    def in_flight_depth(self) -> int:
        """Iterations a closed loop keeps queued on the GPU.

        Training without a pause keeps two, so the GPU never waits for Python between
        iterations; inference answers one request at a time, and a paused job must let the GPU
        go idle during its pause, so both wait for each iteration before the next.
        """
        return 2 if self.training and self.pause_ms == 0 else 1


def parse(name: str) -> WorkloadSpec:
    m = _NAME.match(name)
    if not m or m["model"] not in MODELS:
        raise ValueError(
            f"unknown workload {name!r}: expected <model>_<train|infer>_b<batch>[_p<ms>][_g] "
            f"with model one of {', '.join(MODELS)}"
        )
    if m["graph"] and m["model"] == "sleep":
        raise ValueError(f"unknown workload {name!r}: `sleep` uses no GPU, so it has no graph (_g)")
    return WorkloadSpec(name, m["model"], m["kind"] == "train", int(m["batch"]), int(m["pause"] or 0),
                        bool(m["graph"]))


class Job:
    """One workload instance bound to one CUDA stream.

    `step()` enqueues one whole iteration; `forward()` and `backward()` split a training
    iteration into the two phases TickTock (Wavelet) alternates. Nothing here synchronizes:
    the caller decides when to wait, on `self.stream`.
    """

    def __init__(self, spec: WorkloadSpec, stream_priority: int = 0, seed: int = 0):
        self.spec = spec
        self._loss = None
        if spec.model == "sleep":
            self.stream = None
            return
        import torch

        torch.manual_seed(seed)
        dev = torch.device("cuda")
        self.stream = torch.cuda.Stream(priority=stream_priority)
        self.model = _build_model(spec.model).to(dev)
        if spec.model == "transformer":
            self.inputs = torch.randint(0, TRANSFORMER_VOCAB, (spec.batch, TRANSFORMER_SEQ), device=dev)
            self.targets = torch.randint(0, TRANSFORMER_VOCAB, (spec.batch, TRANSFORMER_SEQ), device=dev)
        else:
            self.inputs = torch.randn(spec.batch, 3, 224, 224, device=dev)
            self.targets = torch.randint(0, 1000, (spec.batch,), device=dev)
        self.criterion = torch.nn.CrossEntropyLoss()
        if spec.training:
            self.model.train()
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        else:
            self.model.eval()
        self.graph = self._capture() if spec.graph else None
        torch.cuda.synchronize()

    def _capture(self):
        """One iteration captured as a CUDA graph, after warm-up iterations on the job's stream
        (the optimizer's state and cuBLAS's workspaces then exist before the capture, as
        PyTorch's "whole-network capture" recipe asks)."""
        import torch

        self.stream.wait_stream(torch.cuda.current_stream())
        for _ in range(3):
            self._iteration()
        torch.cuda.current_stream().wait_stream(self.stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        if self.spec.training:
            self.optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph, stream=self.stream):
            self._iteration(in_graph=True)
        torch.cuda.synchronize()
        return graph

    def _iteration(self, in_graph=False):
        """One whole iteration enqueued on the job's stream, outside a graph or inside one being
        captured (there the gradients are not zeroed: the captured backward writes them)."""
        import torch

        with torch.cuda.stream(self.stream):
            if not self.spec.training:
                with torch.inference_mode():
                    self.model(self.inputs)
                return
            if not in_graph:
                self.optimizer.zero_grad(set_to_none=True)
            loss = self._loss_of(self.model(self.inputs))
            loss.backward()
            self.optimizer.step()

    def _loss_of(self, out):
        if self.spec.model == "transformer":
            return self.criterion(out.reshape(-1, TRANSFORMER_VOCAB), self.targets.reshape(-1))
        return self.criterion(out, self.targets)

    def forward(self):
        if self.stream is None:
            time.sleep(SLEEP_STEP_S / 2)
            return
        import torch

        if self.graph is not None:  # the whole iteration: a graph is not split
            with torch.cuda.stream(self.stream):
                self.graph.replay()
            return

        with torch.cuda.stream(self.stream):
            if not self.spec.training:
                with torch.inference_mode():
                    self.model(self.inputs)
                return
            self.optimizer.zero_grad(set_to_none=True)
            self._loss = self._loss_of(self.model(self.inputs))

    def backward(self):
        if self.stream is None:
            time.sleep(SLEEP_STEP_S / 2)
            return
        if not self.spec.training or self.graph is not None:
            return
        import torch

        with torch.cuda.stream(self.stream):
            self._loss.backward()
            self.optimizer.step()
            self._loss = None

    def step(self):
        self.forward()
        self.backward()

    def record(self):
        """An event marking the end of the work enqueued so far (None for `sleep`)."""
        if self.stream is None:
            return None
        import torch

        ev = torch.cuda.Event()
        ev.record(self.stream)
        return ev

    def wait_idle(self):
        if self.stream is not None:
            self.stream.synchronize()


def _build_model(model: str):
    import torchvision

    if model == "resnet50":
        return torchvision.models.resnet50(weights=None)
    if model == "mobilenet_v2":
        return torchvision.models.mobilenet_v2(weights=None)
    if model == "transformer":
        return _token_encoder_class()()
    raise ValueError(model)


def _token_encoder_class():
    import torch

    class TokenEncoder(torch.nn.Module):
        """Embedding, a TransformerEncoder and a per-token classifier (a masked-LM-like loss)."""

        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(TRANSFORMER_VOCAB, TRANSFORMER_DIM)
            layer = torch.nn.TransformerEncoderLayer(
                TRANSFORMER_DIM, TRANSFORMER_HEADS, dim_feedforward=4 * TRANSFORMER_DIM,
                dropout=0.1, batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, TRANSFORMER_LAYERS, enable_nested_tensor=False)
            self.head = torch.nn.Linear(TRANSFORMER_DIM, TRANSFORMER_VOCAB)

        def forward(self, tokens):
            return self.head(self.encoder(self.embed(tokens)))

    return TokenEncoder
