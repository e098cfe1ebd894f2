"""Direct launches (launch.py): the wrapper calls a binary's launcher with packed arguments,
and takes the `kernel[grid]` path for an address the binary was not specialized for.

No GPU here: the "binary" is a recorder that runs the kernel through the interpreter, so the
wrapper's calls are checked for their arguments and the results against eager."""

from __future__ import annotations

import torch

from ember_codegen.triton.cache import load_module
from ember_codegen.triton.launch import DirectLaunch, alignment_check, direct_launch
from ember_codegen.triton.wrapper import build_wrapper, runtime_namespace
from ember_primops import prims


def _chain(a, b):
    x = prims.exp(prims.add(a, b))
    return (prims.neg(prims.sum(prims.mul(x, x), [1])), prims.sin(x))


class RecordingBinary:
    """Stands in for a compiled kernel: its launcher runs the JIT function (interpreted)."""

    def __init__(self, jit_fn, kernel):
        self.jit_fn, self.kernel, self.calls = jit_fn, kernel, []
        self.function, self.packed_metadata = object(), object()

    def run(self, gx, gy, gz, stream, function, metadata, meta, enter, leave, *args):
        assert (function, metadata) == (self.function, self.packed_metadata)
        assert (gy, gz, enter, leave) == (1, 1, None, None)
        self.calls.append(args)
        tensors = args[: len(self.kernel.params)]
        names = list(self.kernel.config.constexprs(self.kernel.reduction))
        consts = dict(zip(names, args[len(tensors) :], strict=True))
        self.jit_fn[(gx,)](*tensors, **consts, num_warps=self.kernel.config.num_warps)


def _wrapped(compiled, sched, aligned_names=None):
    module, _ = load_module(compiled.triton_source)
    binaries = {}
    for kernel in compiled.kernels:
        binary = RecordingBinary(getattr(module, kernel.name), kernel)
        aligned = frozenset(kernel.params if aligned_names is None else aligned_names)
        kernel.direct = DirectLaunch(binary.run, binary.function, binary.packed_metadata, aligned)
        binaries[kernel.name] = binary
    wrapper = build_wrapper(sched, {g.name: g for g in compiled.groups})
    namespace = {**runtime_namespace(torch.device("cpu")), **wrapper.namespace}
    for kernel in compiled.kernels:
        namespace[f"_k_{kernel.name}"] = getattr(module, kernel.name)
    exec(compile(wrapper.source, "<wrapper>", "exec"), namespace)
    return namespace["call"], wrapper.source, binaries


def test_wrapper_launches_binaries_directly(compile_prims):
    a, b = torch.randn(8, 16), torch.randn(8, 16)
    sched, compiled = compile_prims(_chain, a, b)
    call, source, binaries = _wrapped(compiled, sched)
    assert "_stream = _current_stream()" in source and "_run_" in source
    torch.testing.assert_close(call([a, b]), list(_chain(a, b)))
    assert all(len(binary.calls) == 1 for binary in binaries.values())
    first = next(iter(binaries.values())).calls[0]
    assert first[0] is a or first[0] is b  # the tensors themselves, then the block sizes
    assert isinstance(first[-1], int)


def test_misaligned_input_takes_the_jit_path(compile_prims):
    a, b = torch.randn(8, 16), torch.randn(8, 16)
    sched, compiled = compile_prims(_chain, a, b)
    call, _, binaries = _wrapped(compiled, sched)
    storage = torch.randn(8 * 16 + 1)
    shifted = storage[1:].view(8, 16)  # 4 bytes past an aligned address
    assert shifted.data_ptr() % 16
    torch.testing.assert_close(call([shifted, b]), list(_chain(shifted, b)))
    readers = [k for k in compiled.kernels if sched.graph_inputs[0] in k.params]
    assert readers and all(not binaries[k.name].calls for k in readers)


def test_parameters_not_assumed_aligned_are_not_checked(compile_prims):
    a, b = torch.randn(8, 16), torch.randn(8, 16)
    sched, compiled = compile_prims(_chain, a, b)
    call, source, binaries = _wrapped(compiled, sched, aligned_names=())
    assert "data_ptr()" not in source.split("_stream = _current_stream()")[1]
    storage = torch.randn(8 * 16 + 1)
    shifted = storage[1:].view(8, 16)
    torch.testing.assert_close(call([shifted, b]), list(_chain(shifted, b)))
    assert all(len(binary.calls) == 1 for binary in binaries.values())


def test_alignment_condition_and_unloadable_binaries():
    assert alignment_check(["x", "y"]) == "(x.data_ptr() | y.data_ptr()) % 16 == 0"
    assert alignment_check([]) == "True"

    class Broken:
        @property
        def run(self):
            raise RuntimeError("no device")

    assert direct_launch(Broken(), ["x"], [torch.zeros(1)]) is None
