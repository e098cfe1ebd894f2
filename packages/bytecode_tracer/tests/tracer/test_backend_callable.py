"""What a backend returns runs with the frame hook off: its Python is never traced."""

from __future__ import annotations

import torch

import ember_frame_hook as fh
from ember_bytecode_tracer.convert_frame import FrameCompiler, is_skipped


def test_callable_returned_by_a_backend_is_not_traced():
    runs = []

    def wrapper_runtime(gm, *args):  # Python with tensor work, like an aot runtime wrapper
        runs.append(fh.get_eval_frame())
        doubled = [a * 1 for a in args]
        return gm(*doubled)

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return lambda *args: wrapper_runtime(gm, *args)

    def fn(x):
        return torch.sin(x) + 1

    compiler = FrameCompiler(backend)
    x = torch.randn(4)
    with fh.eval_frame(compiler):
        got = fn(x)
        fn(x)
    torch.testing.assert_close(got[0] if isinstance(got, tuple) else got, torch.sin(x) + 1)
    assert len(graphs) == 1, "the runtime wrapper was traced into graphs of its own"
    assert [r.code.co_name for r in compiler.records] == ["fn"]
    assert runs == [None, None], "the backend's callable must run with the hook off"


def test_ember_stage_packages_are_skipped_by_path():
    import ember_bytecode_tracer.convert_frame as convert_frame

    assert is_skipped(convert_frame.is_skipped.__code__)
    assert any(
        root.rstrip("/").endswith("ember_bytecode_tracer") for root in convert_frame._SKIP_ROOTS
    )


def test_struct_sequence_results_keep_their_type_and_nested_tensors():
    """torch.histogramdd returns (hist, bin_edges) with bin_edges a tuple of tensors: every
    tensor must come out of the graph (never a fake example value), in the same type."""
    from conftest import Compiled

    def fn(x):
        result = torch.histogramdd(x, bins=[3, 3])
        top = torch.max(x, 0)
        return result, top.values * 2, top

    x = torch.randn(10, 2)
    compiled = Compiled(fn)
    got, expected = compiled(x), fn(x)
    assert type(got[0]) is type(expected[0]) and type(got[2]) is type(expected[2])
    assert type(got[0].bin_edges[0]) is torch.Tensor
    torch.testing.assert_close(got[0].hist, expected[0].hist)
    for g, e in zip(got[0].bin_edges, expected[0].bin_edges, strict=True):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(got[1], expected[1])
    torch.testing.assert_close(got[2].indices, expected[2].indices)
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_factory_only_frames_naming_a_torch_function_are_compiled():
    from conftest import Compiled

    arange = torch.arange
    globals()["_arange_for_test"] = arange

    def fn():
        return _arange_for_test(6).reshape(2, 3) * 2  # noqa: F821  (set just above)

    compiled = Compiled(fn)
    torch.testing.assert_close(compiled(), fn())
    assert compiled.backend.graph_count == 1
