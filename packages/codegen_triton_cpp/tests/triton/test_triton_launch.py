"""Direct launches (launch.py): the wrapper calls a binary's launcher with packed arguments,
and takes the `kernel[grid]` path for an address the binary was not specialized for.

No GPU here: the "binary" is a recorder that runs the kernel through the interpreter, so the
wrapper's calls are checked for their arguments and the results against eager."""

from __future__ import annotations

import torch

from ember_codegen.triton import launch
from ember_codegen.triton.cache import load_module
from ember_codegen.triton.launch import DirectLaunch, alignment_check, direct_launch, raw_launch
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

    def raw(self, gx, gy, gz, stream, function, cooperative, pdl, scratch, profile, *rest):
        """Triton 3.6's compiled launch function: flags and scratch, then what run takes."""
        assert (cooperative, pdl, scratch, profile) == (False, True, None, None)
        self.raw_calls += 1
        self.run(gx, gy, gz, stream, function, *rest)

    raw_calls = 0


def _wrapped(compiled, sched, aligned_names=None, raw=False):
    module, _ = load_module(compiled.triton_source)
    binaries = {}
    for kernel in compiled.kernels:
        binary = RecordingBinary(getattr(module, kernel.name), kernel)
        aligned = frozenset(kernel.params if aligned_names is None else aligned_names)
        kernel.direct = DirectLaunch(
            binary.run, binary.function, binary.packed_metadata, aligned,
            raw=binary.raw if raw else None, raw_flags=(False, True),
        )  # fmt: skip
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


def test_wrapper_calls_the_compiled_launch_function_where_its_convention_is_known(compile_prims):
    a, b = torch.randn(8, 16), torch.randn(8, 16)
    sched, compiled = compile_prims(_chain, a, b)
    call, source, binaries = _wrapped(compiled, sched, raw=True)
    assert "_launch_" in source and "_run_" not in source
    torch.testing.assert_close(call([a, b]), list(_chain(a, b)))
    assert all(binary.raw_calls == 1 for binary in binaries.values())


class Launcher36:
    """The shape of Triton 3.6's CudaLauncher."""

    global_scratch_size = profile_scratch_size = 0
    launch_cooperative_grid, launch_pdl = False, True

    def __init__(self):
        self.launch = lambda *args: None

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        raise AssertionError("not called")


class Launcher37(Launcher36):
    def __call__(self, gridX, gridY, gridZ, stream, function, kernel_metadata, *rest):
        raise AssertionError("not called")


def test_raw_launch_only_for_a_known_convention_without_scratch(monkeypatch):
    import triton

    version = ".".join(triton.__version__.split(".")[:2])
    check = launch.RAW_LAUNCH_CONVENTIONS["3.6"]
    monkeypatch.setitem(launch.RAW_LAUNCH_CONVENTIONS, version, check)
    launcher = Launcher36()
    assert raw_launch(launcher) == (launcher.launch, (False, True))
    assert raw_launch(Launcher37()) is None  # another calling convention
    scratch = Launcher36()
    scratch.global_scratch_size = 128  # needs scratch memory: the launcher allocates it
    assert raw_launch(scratch) is None
    monkeypatch.delitem(launch.RAW_LAUNCH_CONVENTIONS, version)
    assert raw_launch(launcher) is None  # a Triton version not known


def test_the_inputs_alignment_is_checked_once_per_call(compile_prims):
    a, b = torch.randn(8, 16), torch.randn(8, 16)
    sched, compiled = compile_prims(_chain, a, b)
    call, source, binaries = _wrapped(compiled, sched)
    assert source.count("_inputs_aligned = ") == 1
    body = source.split("_inputs_aligned = ")[1].split("\n", 1)[1]
    assert "if _inputs_aligned" in body
    assert not any(f"{n}.data_ptr()" in body for n in sched.graph_inputs), body
    torch.testing.assert_close(call([a, b]), list(_chain(a, b)))
    assert all(len(binary.calls) == 1 for binary in binaries.values())


def _column_sums(x):
    return (prims.sum(prims.mul(x, x), [0]),)  # kept dimension contiguous: a split


def test_split_reduction_scratch_is_reused_per_stream_and_thread(compile_prims):
    import threading

    x = torch.randn(4096, 64)
    sched, compiled = compile_prims(_column_sums, x)
    assert any(g.workspaces for g in compiled.groups), "expected a split column reduction"
    call, source, _ = _wrapped(compiled, sched)
    assert "_scratch_key = (_stream, _thread_id())" in source and "_empty_strided" in source
    scratch = call.__defaults__[-1]
    for _ in range(3):  # each call's partials are its own values, in the same tensors
        y = torch.randn(4096, 64)
        torch.testing.assert_close(call([y])[0], _column_sums(y)[0], rtol=1e-4, atol=1e-3)
    assert [len(site) for site in scratch] == [1] * len(scratch)
    first = {key: tuple(map(id, tensors)) for key, tensors in scratch[0].items()}
    other: list = []
    thread = threading.Thread(target=lambda: other.append(call([x])[0]))
    thread.start()
    thread.join()
    torch.testing.assert_close(other[0], _column_sums(x)[0], rtol=1e-4, atol=1e-3)
    assert len(scratch[0]) == 2  # another thread: scratch of its own
    assert {k: tuple(map(id, v)) for k, v in scratch[0].items() if k in first} == first
