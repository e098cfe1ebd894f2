"""`mode="reduce-overhead"`: a compiled GPU graph replayed as CUDA graphs.

A CUDA graph replays fixed kernels on fixed addresses. Parameters keep their storage from
call to call, so they are read in place; every other tensor input is copied into a private
*static* buffer before each replay. One compiled graph often serves several parameter sets
(the same layer code in every transformer block), so the runner keeps one capture per set of
parameter addresses. Outputs are copied out of the graph's memory after each replay, so a
later replay cannot overwrite a tensor the caller holds. Another input shape, dtype or device
means another compiled graph (the tracer's guards and the aot runtime's plan see to that),
hence another runner and another capture: a guard change recaptures. A graph with symbolic
sizes is one runner for every size: it keeps one capture per concrete size signature (each
tensor input's sizes and strides, each int input), for the first `max_sizes` signatures it
meets (options["cudagraph_sizes"], default 8; first come, kept: no eviction, so a size
seen again never recaptures); a later new size runs the compiled graph without a capture
(counted in counters["cudagraphs"]["uncaptured_size_runs"]), known sizes keep replaying.

A graph that writes its inputs in place (an optimizer step compiled with ember-aot-autograd's
INPUT_WRITES_META) is not wrapped at all (inductor.py's _finish): its capture would run it
once more on the real parameters, and replays would copy every moment and gradient in and
every result out.

Capture needs a warm-up call first (Triton compiles its kernels on first launch and the
caching allocator must see the sizes once; a new size is warmed up on the capture stream
right before its capture). A graph that fails to capture, or a runner with more parameter
sets than MAX_CAPTURES, runs without CUDA graphs; counted in counters["cudagraphs"]
(captures, replays, capture_failures, too_many_captures, uncaptured_size_runs).

The CUDA calls sit behind a small `CaptureBackend` (capture, replay, eligible), so that the
keying above is tested on the CPU with the capture machinery stubbed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from ember.stats import counters
from ember_codegen.wrapper import pack_scalars, unpack_scalars

log = logging.getLogger("ember.perf")
WARMUP_CALLS = 1
MAX_CAPTURES = 64
#: concrete size signatures captured per runner (options["cudagraph_sizes"])
DEFAULT_MAX_SIZES = 8


@dataclass
class _Capture:
    graph: torch.cuda.CUDAGraph
    #: StaticInput for copied inputs, the tensor itself for parameters, None for CPU scalars
    static_inputs: list
    outputs: list
    host_scalars: HostScalars


class CaptureBackend(Protocol):
    def eligible(self, inputs: Sequence) -> bool: ...

    def capture(self, compiled: Callable[[list], list], inputs: Sequence, name: str) -> Any: ...

    def replay(self, capture: Any, inputs: Sequence) -> list | None: ...


def size_signature(inputs: Sequence) -> tuple:
    """What one capture is valid for besides parameter addresses: every tensor input's sizes
    and strides (a capture holds static copies of that layout) and every int input (a
    SymInt of the graph arrives as an int)."""
    return tuple(
        (tuple(x.shape), x.stride()) if isinstance(x, torch.Tensor) else x
        for x in inputs
        if isinstance(x, (torch.Tensor, int))
    )


class CudaGraphRunner:
    """Wraps ``compiled(inputs: list) -> list`` of one prim graph whose tensors are on CUDA.
    ``max_sizes``: concrete size signatures captured (a symbolic graph meets several)."""

    def __init__(
        self,
        compiled: Callable[[list], list],
        name: str,
        max_sizes: int = DEFAULT_MAX_SIZES,
        backend: CaptureBackend | None = None,
    ) -> None:
        self.compiled = compiled
        self.name = name
        self.max_sizes = max_sizes
        self.backend = backend if backend is not None else CudaCaptures()
        self.calls = 0
        self.captures: dict[tuple, Any] = {}  # (size signature, parameter addresses) -> capture
        self.sizes: set[tuple] = set()  # size signatures captured (at most max_sizes)
        self.disabled = False

    # kernel_count / fallback_counts stay visible for the backend's counters
    def __getattr__(self, name: str):
        return getattr(self.compiled, name)

    def __call__(self, inputs: Sequence) -> list:
        if self.disabled or not self.backend.eligible(inputs):
            return self.compiled(list(inputs))
        self.calls += 1
        if self.calls <= WARMUP_CALLS:
            return self.compiled(list(inputs))
        sizes = size_signature(inputs)
        key = (sizes, tuple(x.data_ptr() if _is_parameter(x) else 0 for x in inputs))
        capture = self.captures.get(key)
        if capture is None:
            if sizes not in self.sizes and len(self.sizes) >= self.max_sizes:
                if not counters["cudagraphs"]["uncaptured_size_runs"]:
                    log.warning(
                        "%s: %d size signatures captured (options['cudagraph_sizes']); "
                        "new sizes run without CUDA graphs",
                        self.name,
                        self.max_sizes,
                    )
                counters["cudagraphs"]["uncaptured_size_runs"] += 1
                return self.compiled(list(inputs))
            if len(self.captures) >= MAX_CAPTURES:
                counters["cudagraphs"]["too_many_captures"] += 1
                self.disabled = True
                return self.compiled(list(inputs))
            capture = self.backend.capture(self.compiled, inputs, self.name)
            if capture is None:
                self.disabled = True  # a graph that fails to capture runs without them
                return self.compiled(list(inputs))
            self.sizes.add(sizes)
            self.captures[key] = capture
        outputs = self.backend.replay(capture, inputs)
        if outputs is None:
            return self.compiled(list(inputs))  # the compiled graph relayouts it itself
        return outputs


class CudaCaptures:
    """The CUDA graph machinery of CudaGraphRunner."""

    def eligible(self, inputs: Sequence) -> bool:
        return _all_cuda(inputs)

    def capture(self, compiled: Callable[[list], list], inputs: Sequence, name: str):
        scalars = HostScalars(inputs)
        statics = [
            None
            if k in scalars.views
            else StaticInput(x)
            if isinstance(x, torch.Tensor) and not _is_parameter(x)
            else x
            for k, x in enumerate(inputs)
        ]
        values = [
            scalars.views[k] if k in scalars.views else s.view if isinstance(s, StaticInput) else s
            for k, s in enumerate(statics)
        ]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # one more warm-up on the capture stream
            compiled(list(values))
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                outputs = compiled(list(values))
        except Exception as error:
            log.warning("CUDA graph capture of %s failed (%s); running without it", name, error)
            counters["cudagraphs"]["capture_failures"] += 1
            return None
        counters["cudagraphs"]["captures"] += 1
        return _Capture(graph, statics, outputs, scalars)

    def replay(self, capture: _Capture, inputs: Sequence) -> list | None:
        capture.host_scalars.load(inputs)
        for static, value in zip(capture.static_inputs, inputs, strict=True):
            if isinstance(static, StaticInput) and not static.load(value):
                counters["cudagraphs"]["layout_fallbacks"] += 1
                return None
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


class HostScalars:
    """The CPU scalar inputs of a captured GPU graph (an optimizer's step counts, which
    torch.optim keeps on the CPU): the capture reads them as 0-dim views of one device
    block per dtype, which each replay refills from the host in one copy."""

    def __init__(self, inputs: Sequence) -> None:
        self.groups: list[tuple[list[int], torch.Tensor]] = []
        self.views: dict[int, torch.Tensor] = {}
        positions: dict[torch.dtype, list[int]] = {}
        for k, x in enumerate(inputs):
            if _host_scalar(x):
                positions.setdefault(x.dtype, []).append(k)
        cuda = (x.device for x in inputs if isinstance(x, torch.Tensor) and x.is_cuda)
        device = next(cuda, None) or torch.device("cuda", torch.cuda.current_device())
        for group in positions.values():
            block = pack_scalars([inputs[k] for k in group]).to(device)
            self.groups.append((group, block))
            self.views.update(zip(group, unpack_scalars(block), strict=True))

    def load(self, inputs: Sequence) -> None:
        for group, block in self.groups:
            block.copy_(pack_scalars([inputs[k] for k in group]), non_blocking=True)


def _span(value: torch.Tensor) -> int:
    """Elements from the tensor's first element to its last one in storage."""
    if value.numel() == 0:
        return 0
    return 1 + sum((n - 1) * abs(s) for n, s in zip(value.shape, value.stride(), strict=True))


def _host_scalar(x: object) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "cpu" and x.dim() == 0


def _all_cuda(inputs: Sequence) -> bool:
    """Every tensor on the GPU, but for CPU scalars (HostScalars)."""
    return all(not isinstance(x, torch.Tensor) or x.is_cuda or _host_scalar(x) for x in inputs)


def _is_parameter(x: object) -> bool:
    # parameters keep their address between calls: the graph reads them in place
    return isinstance(x, torch.nn.Parameter)
