"""`mode="reduce-overhead"`: a compiled GPU graph replayed as CUDA graphs.

A CUDA graph replays fixed kernels on fixed addresses. Parameters keep their storage from
call to call, so they are read in place; every other tensor input is copied into a private
*static* buffer before each replay. One compiled graph often serves several parameter sets
(the same layer code in every transformer block), so the runner keeps one capture per set of
parameter addresses. Outputs are copied out of the graph's memory after each replay, so a
later replay cannot overwrite a tensor the caller holds. Another input shape, dtype or device
means another compiled graph (the tracer's guards and the aot runtime's plan see to that),
hence another runner and another capture: a guard change recaptures.

Capture needs a warm-up call first (Triton compiles its kernels on first launch and the
caching allocator must see the sizes once). A graph that fails to capture, or a runner with
more parameter sets than MAX_CAPTURES, runs without CUDA graphs; counted in
counters["cudagraphs"] (captures, replays, capture_failures, too_many_captures).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ember.stats import counters

log = logging.getLogger("ember.perf")
WARMUP_CALLS = 1
MAX_CAPTURES = 64


@dataclass
class _Capture:
    graph: torch.cuda.CUDAGraph
    static_inputs: list  # StaticInput for copied inputs, the tensor itself for parameters
    outputs: list


class CudaGraphRunner:
    """Wraps ``compiled(inputs: list) -> list`` of one prim graph whose tensors are on CUDA."""

    def __init__(self, compiled: Callable[[list], list], name: str) -> None:
        self.compiled = compiled
        self.name = name
        self.calls = 0
        self.captures: dict[tuple[int, ...], _Capture] = {}
        self.disabled = False

    # kernel_count / fallback_counts stay visible for the backend's counters
    def __getattr__(self, name: str):
        return getattr(self.compiled, name)

    def __call__(self, inputs: Sequence) -> list:
        if self.disabled or not _all_cuda(inputs):
            return self.compiled(list(inputs))
        self.calls += 1
        if self.calls <= WARMUP_CALLS:
            return self.compiled(list(inputs))
        key = tuple(x.data_ptr() if _is_parameter(x) else 0 for x in inputs)
        capture = self.captures.get(key)
        if capture is None:
            if len(self.captures) >= MAX_CAPTURES:
                counters["cudagraphs"]["too_many_captures"] += 1
                self.disabled = True
                return self.compiled(list(inputs))
            capture = self._capture(inputs)
            if capture is None:
                return self.compiled(list(inputs))
            self.captures[key] = capture
        return self._replay(capture, inputs)

    def _capture(self, inputs: Sequence) -> _Capture | None:
        statics = [
            StaticInput(x) if isinstance(x, torch.Tensor) and not _is_parameter(x) else x
            for x in inputs
        ]
        values = [s.view if isinstance(s, StaticInput) else s for s in statics]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # one more warm-up on the capture stream
            self.compiled(list(values))
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                outputs = self.compiled(list(values))
        except Exception as error:
            log.warning(
                "CUDA graph capture of %s failed (%s); running without it", self.name, error
            )
            counters["cudagraphs"]["capture_failures"] += 1
            self.disabled = True
            return None
        counters["cudagraphs"]["captures"] += 1
        return _Capture(graph, statics, outputs)

    def _replay(self, capture: _Capture, inputs: Sequence) -> list:
        for static, value in zip(capture.static_inputs, inputs, strict=True):
            if isinstance(static, StaticInput) and not static.load(value):
                counters["cudagraphs"]["layout_fallbacks"] += 1
                return self.compiled(list(inputs))  # the compiled graph relayouts it itself
        capture.graph.replay()
        counters["cudagraphs"]["replays"] += 1
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in capture.outputs]


class StaticInput:
    """A private copy of an input with the same sizes, strides and storage offset, so that the
    captured kernels read it exactly as they read the original (expanded, strided and
    overlapping layouts included: the whole storage span is copied, not the elements)."""

    def __init__(self, value: torch.Tensor) -> None:
        self.span = _span(value)
        self.base = torch.empty(max(self.span, 1), dtype=value.dtype, device=value.device)
        self.view = self.base.as_strided(value.shape, value.stride(), 0)
        self.load(value)

    def load(self, value: torch.Tensor) -> bool:
        """Copy ``value`` in; False when it cannot be (another layout of an overlapping view)."""
        if self.span == 0 or value.data_ptr() == self.view.data_ptr():
            return True
        if value.stride() == self.view.stride():
            span = value.as_strided((self.span,), (1,), value.storage_offset())
            self.base[: self.span].copy_(span)
            return True
        if self.span == self.view.numel():  # a dense static view takes any layout element-wise
            self.view.copy_(value)
            return True
        return False


def _span(value: torch.Tensor) -> int:
    """Elements from the tensor's first element to its last one in storage."""
    if value.numel() == 0:
        return 0
    return 1 + sum((n - 1) * abs(s) for n, s in zip(value.shape, value.stride(), strict=True))


def _all_cuda(inputs: Sequence) -> bool:
    return all(not isinstance(x, torch.Tensor) or x.is_cuda for x in inputs)


def _is_parameter(x: object) -> bool:
    # parameters keep their address between calls: the graph reads them in place
    return isinstance(x, torch.nn.Parameter)
