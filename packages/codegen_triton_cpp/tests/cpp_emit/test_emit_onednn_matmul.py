"""Float32 products with a row-major left operand of MIN_ROWS to MAX_ROWS rows and at least
MIN_MACS multiply-adds are computed by oneDNN's linear (onednn_matmul); others, a
transposed left operand (a weight gradient) and other dtypes keep aten's mm. Values are
compared with eager."""

import pytest
import torch

from ember_codegen.cpp.emit import onednn_matmul
from ember_primops import prims

pytestmark = pytest.mark.skipif(
    not onednn_matmul.ENABLED, reason="no oneDNN, or EMBER_CPU_ONEDNN_MM=0"
)

M, K, N = 128, 256, 192  # 6.3M multiply-adds: above MIN_MACS


@pytest.fixture(autouse=True)
def route_without_calibrating(monkeypatch):
    # which products may route is what these tests check, not this CPU's verdict
    monkeypatch.setenv("EMBER_CPU_ONEDNN_MM", "1")


def _inputs(dtype=torch.float32):
    torch.manual_seed(0)
    return [t.to(dtype) for t in (torch.randn(M, K), torch.randn(N, K), torch.randn(N))]


def test_a_large_product_of_a_row_major_operand_calls_onednn(check):
    x, w, _ = _inputs()
    _, compiled = check(lambda x, w: (prims.mm(x, prims.permute(w, [1, 0])),), x, w,
                        atol=1e-4, rtol=1e-4)  # fmt: skip
    # the fresh result is the buffer: no copy into planned storage
    assert compiled.wrapper_source.count(" = _dnn_mm(arg0, ") == 1
    assert "_mm_out" not in compiled.wrapper_source


def test_a_linear_with_its_bias_calls_onednn_with_the_bias(check):
    def f(x, w, b):
        y = prims.mm(x, prims.permute(w, [1, 0]))
        return (prims.add(y, prims.broadcast_in_dim(b, [M, N], [1])),)

    _, compiled = check(f, *_inputs(), atol=1e-4, rtol=1e-4)
    assert compiled.wrapper_source.count(" = _dnn_addmm(arg2, arg0, ") == 1
    assert compiled.kernel_count == 0


def test_a_result_in_a_dead_results_storage_releases_it_and_matches_eager(check):
    # the plan puts u in e's storage (e dies at the first product; the tanh writes over
    # y): e is released before oneDNN makes u, whose fresh tensor becomes the buffer
    def f(x, w, w2):
        y = prims.mm(prims.exp(x), prims.permute(w, [1, 0]))
        z = prims.tanh(y)
        u = prims.mm(z, prims.permute(w2, [1, 0]))
        return (prims.neg(u),)

    torch.manual_seed(0)
    x, w, w2 = torch.randn(M, K) * 0.1, torch.randn(K, K) * 0.1, torch.randn(K, K)
    sched, compiled = check(f, x, w, w2, atol=1e-4, rtol=1e-4)
    e = sched[0].nodes[0].buffer.name
    (_, u) = [g.extern.outputs[0].name for g in sched if g.extern is not None]
    assert sched.allocations[u].reuses == e, sched.describe()
    source = compiled.wrapper_source
    assert f"del {e}\n    {u} = _dnn_mm(" in source
    assert "_mm_out" not in source


def test_a_transposed_left_operand_keeps_mm(check):
    # g.t() @ x: a weight gradient, where oneDNN measured slower than MKL
    g, x = torch.randn(M, N), torch.randn(M, K)
    _, compiled = check(lambda g, x: (prims.mm(prims.permute(g, [1, 0]), x),), g, x,
                        atol=1e-4, rtol=1e-4)  # fmt: skip
    assert "_dnn_" not in compiled.wrapper_source
    assert "_mm_out(" in compiled.wrapper_source


def test_small_products_and_float64_keep_mm(check):
    x, w, _ = _inputs()
    small = lambda x, w: (prims.mm(x, prims.permute(w, [1, 0])),)  # noqa: E731
    _, compiled = check(small, x[:8], w, atol=1e-4, rtol=1e-4)
    assert "_dnn_" not in compiled.wrapper_source
    x64, w64, _ = _inputs(torch.float64)
    _, compiled = check(small, x64, w64)
    assert "_dnn_" not in compiled.wrapper_source


def test_the_choice_reads_static_layouts():
    from ember_inductor_ir.layout import Layout

    def layout(size, stride, dtype=torch.float32):
        return Layout(torch.device("cpu"), dtype, list(size), list(stride))

    a, b, bias = layout((M, K), (K, 1)), layout((K, N), (1, K)), layout((N,), (1,))
    assert onednn_matmul.use_onednn("mm", [a, b], {})
    assert onednn_matmul.use_onednn("addmm", [bias, a, b], {})
    assert not onednn_matmul.use_onednn("addmm", [layout((M, N), (N, 1)), a, b], {})
    assert not onednn_matmul.use_onednn("addmm", [bias, a, b], {"beta": 2})
    assert not onednn_matmul.use_onednn("mm", [layout((M, K), (1, M)), b], {})
    assert not onednn_matmul.use_onednn("bmm", [a, b], {})
    tall = layout((1024, K), (K, 1))  # MKL is as fast or faster there
    assert not onednn_matmul.use_onednn("mm", [tall, b], {})
    # the Triton target's wrapper builds on the same builder: GPU products keep mm
    on_gpu = [
        Layout(torch.device("cuda"), torch.float32, list(t.size), list(t.stride)) for t in (a, b)
    ]
    assert not onednn_matmul.use_onednn("mm", on_gpu, {})


def test_auto_routes_by_this_cpus_measured_verdict_stored_once(monkeypatch, tmp_path):
    """EMBER_CPU_ONEDNN_MM=auto (the default): one calibration per CPU model, torch and
    thread count, kept on disk; a later process reads it instead of measuring."""
    monkeypatch.setenv("EMBER_CPU_ONEDNN_MM", "auto")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(onednn_matmul, "_verdicts", {})
    measured = []

    def slower():
        measured.append(1)
        return 1.2  # oneDNN 20% slower than mm here (an Intel CPU with a strong MKL)

    monkeypatch.setattr(onednn_matmul, "calibrate", slower)
    assert not onednn_matmul.onednn_pays()
    assert not onednn_matmul.onednn_pays() and measured == [1]  # once per process
    monkeypatch.setattr(onednn_matmul, "_verdicts", {})  # a new process: read from disk
    monkeypatch.setattr(onednn_matmul, "calibrate", lambda: pytest.fail("measured again"))
    assert not onednn_matmul.onednn_pays()
    monkeypatch.setattr(onednn_matmul, "_verdicts", {})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 977)  # another thread count
    monkeypatch.setattr(onednn_matmul, "calibrate", lambda: 0.8)
    assert onednn_matmul.onednn_pays()
    monkeypatch.setenv("EMBER_CPU_ONEDNN_MM", "0")
    assert not onednn_matmul.onednn_pays()


def test_calibration_measures_a_ratio():
    ratio = onednn_matmul.calibrate()
    assert 0.1 < ratio < 10
