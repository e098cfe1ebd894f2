"""`mode="reduce-overhead"`: a compiled GPU graph replayed as one CUDA graph.

A CUDA graph replays fixed kernels on fixed addresses, so the runner keeps *static* inputs:
each call copies an input into its static buffer unless it already is that buffer (the
module's parameters usually are: they keep their storage from call to call). Outputs are
copied out of the graph's memory after each replay, so a later replay cannot overwrite a
tensor the caller holds. Another input shape, dtype or device means another compiled graph
(the tracer's guards and the aot runtime's plan see to that), hence another runner and
another capture: a guard change recaptures.

Capture needs warm-up calls first (Triton compiles and caches kernels on first launch, and
the caching allocator must see the sizes once); errors during capture leave the graph
uncaptured and the runner falls back to plain calls, counted in counters["cudagraphs"].
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import torch

from ember.stats import counters

log = logging.getLogger("ember.perf")
WARMUP_CALLS = 1


class CudaGraphRunner:
    """Wraps ``compiled(inputs: list) -> list`` of one prim graph whose tensors are on CUDA."""

    def __init__(self, compiled: Callable[[list], list], name: str) -> None:
        self.compiled = compiled
        self.name = name
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_inputs: list = []
        self.static_outputs: list = []
        self.failed = False

    # kernel_count / fallback_counts stay visible for the backend's counters
    def __getattr__(self, name: str):
        return getattr(self.compiled, name)

    def __call__(self, inputs: Sequence) -> list:
        if self.failed or not _all_cuda(inputs):
            return self.compiled(list(inputs))
        if self.graph is None:
            self.calls += 1
            if self.calls <= WARMUP_CALLS:
                return self.compiled(list(inputs))
            return self._capture(inputs)
        return self._replay(inputs)

    def _capture(self, inputs: Sequence) -> list:
        self.static_inputs = [
            x.clone() if isinstance(x, torch.Tensor) and not _is_parameter(x) else x for x in inputs
        ]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # one more warm-up on the capture stream
            self.compiled(list(self.static_inputs))
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.static_outputs = self.compiled(list(self.static_inputs))
        except Exception as error:
            log.warning(
                "CUDA graph capture of %s failed (%s); running without it", self.name, error
            )
            counters["cudagraphs"]["capture_failures"] += 1
            self.failed = True
            return self.compiled(list(inputs))
        self.graph = graph
        counters["cudagraphs"]["captures"] += 1
        return self._replay(inputs)

    def _replay(self, inputs: Sequence) -> list:
        for static, value in zip(self.static_inputs, inputs, strict=True):
            if isinstance(static, torch.Tensor) and static.data_ptr() != value.data_ptr():
                static.copy_(value)
        self.graph.replay()
        counters["cudagraphs"]["replays"] += 1
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in self.static_outputs]


def _all_cuda(inputs: Sequence) -> bool:
    return all(not isinstance(x, torch.Tensor) or x.is_cuda for x in inputs)


def _is_parameter(x: torch.Tensor) -> bool:
    # parameters and buffers keep their address between calls: the graph reads them in place
    return isinstance(x, torch.nn.Parameter)
