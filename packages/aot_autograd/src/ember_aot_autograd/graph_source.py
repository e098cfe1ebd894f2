"""A functional graph as source text plus its inputs' metadata, and back to a GraphModule.

Constant tensors the graph reads through get_attr (lifted by the tracer: `torch.tensor(...)`
inside the model, tables built by decompositions) travel with the source as encoded bytes.
`graph_to_source` refuses (NotSerializable) what the source does not capture: submodules,
other attributes, overlapping or huge constants, and globals other than torch and literals.
`graph_from_source` re-traces the source with torch.fx and recomputes every node's
meta['val'] on fake tensors, so the graph can go through the later stages exactly like a
freshly traced one.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import inspect
import math
from dataclasses import dataclass

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_map

from ember_aot_autograd.dense import is_dense
from ember_aot_autograd.plan import NotSerializable

#: globals FX-generated code may use that the rebuilt source gets back by name
SAFE_GLOBALS = {
    "torch": torch,
    "device": torch.device,
    "inf": math.inf,
    "nan": math.nan,
    "NoneType": type(None),
}
try:  # the tracer names NumPy scalars in graph code (`np.int64(16)`): once it registers `np`
    import numpy  # with FX, every graph's code has it among its globals

    SAFE_GLOBALS["np"] = numpy
except ImportError:  # no NumPy, no NumPy scalars
    pass
#: constants larger than this are not written into a graph's source (they would bloat the
#: cache and every key computation); such graphs are not cached
MAX_CONSTANT_BYTES = 1 << 20


@dataclass(frozen=True)
class GraphSource:
    """`forward(self, *placeholders)` source and one (shape, stride, dtype, device, offset)
    per placeholder: everything that determines the graph and its example values."""

    source: str
    inputs: tuple[tuple[tuple[int, ...], tuple[int, ...], str, str, int], ...]
    #: (attribute name, encode_tensor(value)) per get_attr constant
    constants: tuple[tuple[str, dict], ...] = ()

    def to_data(self) -> dict:
        return {
            "source": self.source,
            "inputs": [list(i) for i in self.inputs],
            "constants": [[name, data] for name, data in self.constants],
        }

    @classmethod
    def from_data(cls, data: dict) -> GraphSource:
        inputs = tuple(
            (tuple(size), tuple(stride), str(dtype), str(dev), int(offset))
            for size, stride, dtype, dev, offset in data["inputs"]
        )
        constants = tuple((str(name), dict(value)) for name, value in data.get("constants", ()))
        return cls(str(data["source"]), inputs, constants)

    def identity(self) -> str:
        """Everything that determines the graph, for cache keys (constants by content)."""
        digest = hashlib.sha256()
        for name, value in self.constants:
            meta = sorted((k, v) for k, v in value.items() if k != "data")  # any key order
            digest.update(repr((name, meta)).encode())
            digest.update(value["data"].encode())
        return f"{self.source}\n{self.inputs!r}\nconstants={digest.hexdigest()}"


def encode_tensor(value: torch.Tensor, what: str = "constant") -> dict:
    """A dense CPU-or-device tensor as plain data (dtype, size, stride, device, base64 bytes)."""
    if type(value) is not torch.Tensor and type(value) is not torch.nn.Parameter:
        raise NotSerializable(f"{what} is a {type(value).__name__}")
    if value.layout != torch.strided or value.is_quantized or value.requires_grad:
        raise NotSerializable(f"{what} is not a plain strided tensor")
    if not is_dense(value) and value.numel() > 1:
        raise NotSerializable(f"{what} has overlapping or gapped strides {value.stride()}")
    nbytes = value.numel() * value.element_size()
    if nbytes > MAX_CONSTANT_BYTES:
        raise NotSerializable(f"{what} holds {nbytes} bytes (limit {MAX_CONSTANT_BYTES})")
    flat = value.detach().reshape(-1).cpu().contiguous()
    # the bytes straight from memory: numpy is not a dependency of this package
    raw = ctypes.string_at(flat.data_ptr(), nbytes) if nbytes else b""
    return {
        "dtype": str(value.dtype).removeprefix("torch."),
        "size": list(value.shape),
        "stride": list(value.stride()),
        "device": str(value.device),
        "data": base64.b64encode(raw).decode("ascii"),
    }


def decode_tensor(data: dict) -> torch.Tensor:
    """The tensor `encode_tensor` described, with its strides."""
    dtype = getattr(torch, data["dtype"])
    raw = base64.b64decode(data["data"])
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0)
    flat = flat.view(dtype) if raw else torch.empty(0, dtype=dtype)
    out = torch.empty_strided(
        tuple(data["size"]), tuple(data["stride"]), dtype=dtype, device=data["device"]
    )
    # the bytes are in logical (row-major) order whatever the strides
    out.copy_(flat.reshape(tuple(data["size"])))
    return out


def tensor_layout(value: torch.Tensor) -> tuple:
    dtype = str(value.dtype).removeprefix("torch.")
    return (
        tuple(value.shape),
        tuple(value.stride()),
        dtype,
        str(value.device),
        value.storage_offset(),
    )


def graph_to_source(gm: torch.fx.GraphModule) -> GraphSource:
    """The graph's source and input layouts; NotSerializable if the source misses anything."""
    inputs = []
    constants: dict[str, dict] = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr" and "." not in node.target:
            value = getattr(gm, node.target, None)
            if not isinstance(value, torch.Tensor):
                raise NotSerializable(f"graph reads attribute {node.target!r} (not a tensor)")
            constants.setdefault(node.target, encode_tensor(value, f"constant {node.target}"))
            continue
        if node.op in ("get_attr", "call_module"):
            raise NotSerializable(f"graph reads attribute {node.target!r} ({node.op})")
        if node.op == "placeholder":
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor) or val.layout != torch.strided:
                raise NotSerializable(f"placeholder {node.name} is not a strided tensor")
            inputs.append(tensor_layout(val))
    code = gm.graph.python_code(root_module="self")
    for name, value in code.globals.items():
        if name in SAFE_GLOBALS and SAFE_GLOBALS[name] is value:
            continue
        if name in ("fx_pytree", "pytree"):
            continue  # modules the generated code may name but a flat graph does not use
        raise NotSerializable(f"graph code uses global {name}={value!r}")
    return GraphSource(code.src, tuple(inputs), tuple(sorted(constants.items())))


def _fake_input(mode: FakeTensorMode, layout: tuple) -> torch.Tensor:
    size, stride, dtype, dev, offset = layout
    with mode:
        base = torch.empty_strided(
            (max(offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) + 1, 1)
             if 0 not in size else 1,),
            (1,),
            dtype=getattr(torch, dtype),
            device=torch.device(dev),
        )  # fmt: skip
        return base.as_strided(size, stride, offset)


class _MetaRecorder(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, mode: FakeTensorMode) -> None:
        super().__init__(gm)
        self.mode = mode

    def run_node(self, node: torch.fx.Node):
        value = super().run_node(node)
        if node.op == "get_attr":  # a constant: fake like the tracer's, the real one stays on gm
            value = self.mode.from_tensor(value)
        if node.op != "output":
            node.meta["val"] = value
        return value


class _ConstantReader:
    """`self` of the rebuilt source: `self.<constant>` becomes a get_attr node."""

    def __init__(self, tracer: torch.fx.proxy.GraphAppendingTracer) -> None:
        self._tracer = tracer

    def __getattr__(self, name: str) -> torch.fx.Proxy:
        return torch.fx.Proxy(self._tracer.graph.get_attr(name), self._tracer)


class _OpRecorder:
    """`torch.ops.<ns>.<op>.<overload>(...)` in the source: a call_function node."""

    def __init__(self, tracer: torch.fx.proxy.GraphAppendingTracer, path: tuple = ()) -> None:
        self._tracer = tracer
        self._path = path

    def __getattr__(self, name: str) -> _OpRecorder:
        return _OpRecorder(self._tracer, (*self._path, name))

    def __call__(self, *args, **kwargs):
        op = torch.ops
        for name in self._path:
            op = getattr(op, name)
        return self._tracer.create_proxy("call_function", op, args, kwargs)


class _TorchShim:
    """`torch` for the rebuilt source: ops calls are recorded, everything else is torch's."""

    def __init__(self, tracer: torch.fx.proxy.GraphAppendingTracer) -> None:
        self.ops = _OpRecorder(tracer)

    def __getattr__(self, name: str):
        return getattr(torch, name)


def graph_from_source(graph_source: GraphSource) -> torch.fx.GraphModule:
    """A GraphModule equal to the one `graph_to_source` read, meta['val'] on every node.

    The source is run once on proxies; its op calls are recorded rather than executed, so
    calls without tensor arguments (scalar_tensor, full) stay in the graph."""
    graph = torch.fx.Graph()
    tracer = torch.fx.proxy.GraphAppendingTracer(graph)
    namespace = {**SAFE_GLOBALS, "torch": _TorchShim(tracer)}
    exec(compile(graph_source.source, "<ember graph source>", "exec"), namespace)
    forward = namespace["forward"]
    names = list(inspect.signature(forward).parameters)[1:]  # after self
    proxies = [torch.fx.Proxy(graph.placeholder(name), tracer) for name in names]
    result = forward(_ConstantReader(tracer), *proxies)
    graph.output(tree_map(lambda v: v.node if isinstance(v, torch.fx.Proxy) else v, result))
    root = torch.nn.Module()
    for name, data in graph_source.constants:
        setattr(root, name, decode_tensor(data))
    gm = torch.fx.GraphModule(root, graph)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [_fake_input(mode, layout) for layout in graph_source.inputs]
    with mode:
        _MetaRecorder(gm, mode).run(*fakes)
    return gm
