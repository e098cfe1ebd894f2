"""Programs that once raised in a backend stage where eager runs (issue 14), or ran aten
kernels where a decomposition now compiles them, end to end."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import ember


def test_embedding_bag_with_last_offset_through_inductor(tmp_path, monkeypatch):
    # the aten fallback's unused outputs (offset2bag...) have other sizes than aten's meta
    # says for include_last_offset=True: the wrapper no longer copies them into that layout
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    weight, index, offsets = (
        torch.randn(5, 5),
        torch.tensor([0, 1, 2, 3, 4, 0]),
        torch.tensor([0, 3, 6]),
    )

    def f(w, i, o):
        return F.embedding_bag(i, w, o, mode="sum", include_last_offset=True) * 2

    ember.reset()
    torch.testing.assert_close(
        ember.compile(f, backend="inductor")(weight, index, offsets), f(weight, index, offsets)
    )
    assert ember.counters["inductor"]["forward_runs"] == 1


def test_stft_frames_through_inductor(tmp_path, monkeypatch):
    # as_strided over squeeze/unsqueeze views of a computed (padded) signal
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    x = torch.randn(2, 64, requires_grad=True)

    def f(x):
        return torch.stft(x, 16, hop_length=4, return_complex=True).abs().sum()

    ember.reset()
    out = ember.compile(f, backend="inductor")(x)
    torch.testing.assert_close(out, f(x))
    (grad,) = torch.autograd.grad(out, x)
    (expected,) = torch.autograd.grad(f(x), x)
    torch.testing.assert_close(grad, expected, rtol=1e-4, atol=1e-5)
    assert ember.counters["inductor"]["backward_runs"] == 1


def test_angle_of_complex_and_real_inputs_through_inductor(tmp_path, monkeypatch):
    # aten.angle's decomposition raised for a complex tensor (a stage error where eager runs)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    z = torch.tensor([1 + 1j, -2 + 0.5j, 3 - 3j, 0j, -1 + 0j, complex("nan")])
    x, n = torch.tensor([-2.0, 0.0, 4.0, float("nan")]), torch.tensor([-3, 0, 7])

    def f(z, x, n):
        return torch.angle(z) * 2, torch.angle(x), torch.angle(n)

    ember.reset()
    got, expected = ember.compile(f, backend="inductor")(z, x, n), f(z, x, n)
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, equal_nan=True)
    assert ember.counters["inductor"]["forward_runs"] == 1
    assert not ember.counters["graph_fallbacks"]


def test_output_sliced_to_no_elements_of_a_computed_buffer_through_inductor(tmp_path, monkeypatch):
    # the relu's buffer was held as the empty output view, which torch gives no data pointer
    # (0): the kernel wrote the relu through a null pointer (a segfault)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    x = torch.randn(4, 2, 4, 4)

    def f(x):
        return torch.relu(x)[:, :, :, :0].view(4, 2, -1), torch.relu(x)[:, :, :0, :].sum()

    ember.reset()
    got, expected = ember.compile(f, backend="inductor")(x), f(x)
    for a, b in zip(got, expected, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b)
    assert ember.counters["inductor"]["forward_runs"] == 1


def test_gather_with_sparse_grad_through_inductor(tmp_path, monkeypatch):
    # its backward makes a sparse gradient, which the joint trace raised on (a crash): now
    # the graph runs eagerly, counted, with eager's values and sparse gradient
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    a = torch.randn(3, 4, 5, requires_grad=True)
    index = torch.randint(4, (3, 2, 5))

    def f(a, index):
        return torch.gather(a, 1, index, sparse_grad=True) * 3

    ember.reset()
    out = ember.compile(f, backend="inductor")(a, index)
    torch.testing.assert_close(out, f(a, index))
    (grad,) = torch.autograd.grad(out.sum(), a)
    (expected,) = torch.autograd.grad(f(a, index).sum(), a)
    assert grad.layout == expected.layout == torch.sparse_coo
    torch.testing.assert_close(grad.to_dense(), expected.to_dense())
    assert sum(ember.counters["graph_fallbacks"].values()) == 1


def test_cat_of_channels_last_conv_and_pool_keeps_eager_strides_through_inductor(
    tmp_path, monkeypatch
):
    # max_pool2d's and cat's decompositions gave contiguous results of channels_last inputs
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    conv, pool = torch.nn.Conv2d(8, 3, 1), torch.nn.MaxPool2d(2)
    x = torch.randn(1, 8, 6, 6).to(memory_format=torch.channels_last)
    y = torch.randn(1, 8, 12, 12).to(memory_format=torch.channels_last)

    def f(x, y):
        return torch.cat([conv(x), pool(y)], 1)

    ember.reset()
    with torch.no_grad():
        got, expected = ember.compile(f, backend="inductor")(x, y), f(x, y)
    assert got.stride() == expected.stride()
    torch.testing.assert_close(got, expected)


def test_min_of_a_tensor_with_an_empty_dim_through_inductor(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))

    def f(v):
        r = v.min(dim=1)
        return r.values + 1, r.indices

    ember.reset()
    x = torch.rand(5, 3, 0)
    got, expected = ember.compile(f, backend="inductor")(x), f(x)
    for a, b in zip(got, expected, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype


def test_tensor_written_after_autograd_saved_it_through_aot_eager():
    # fuzz 2026:3: `y.clamp_()` after `y * w` saved y stopped aot's joint trace with
    # autograd's version check; eager's forward runs and its backward raises: so do ours
    scale = torch.nn.Parameter(torch.tensor(0.75))

    def f(y):
        d = {"a": y * scale + 1.0, "b": scale * 2}
        y.clamp_(min=-0.5)
        return d

    ember.reset()
    compiled = ember.compile(f, backend="aot_eager")
    torch.manual_seed(0)
    y = torch.randn(2, 4)
    y_eager = y.clone()
    want, got = f(y_eager), compiled(y)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(y, y_eager)
    assert ember.counters["aot_eager"]["forward_runs"] == 1
    for d in (want, got):
        try:
            d["a"].sum().backward()
        except RuntimeError as error:
            assert "modified by an inplace operation" in str(error)
        else:
            raise AssertionError("backward through the written saved tensor ran")
    for d in (want, got):  # a loss that never reaches the written tensor works in both
        scale.grad = None
        d["b"].sum().backward()
        torch.testing.assert_close(scale.grad, torch.tensor(2.0))


def test_sizes_returned_from_a_symbolic_graph_through_aot_eager():
    # automatic dynamic shapes: the second size makes the graph symbolic; its size outputs
    # (an int, a torch.Size rebuilt by the tracer) ran the graph eagerly ("output: symbolic
    # sizes are not supported"); now computed per call from the inputs' sizes
    def f(x):
        return x.sum(0), x.shape[0] * 2, x.size()

    ember.reset()
    compiled = ember.compile(f, backend="aot_eager")
    for rows in (3, 5, 7, 4):
        x = torch.randn(rows, 4)
        got, want = compiled(x), f(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:] and type(got[1]) is int and type(got[2]) is torch.Size
    assert not ember.counters["graph_fallbacks"]
    assert ember.counters["aot_eager"]["forward_graphs"] == 2  # static, then one symbolic
    assert ember.counters["aot_eager"]["forward_runs"] == 4


def test_input_viewing_a_written_input_through_aot_eager():
    # fuzz 2026:3725: a resume function got t1 = w[0].unsqueeze(0) and w, wrote w and read
    # t1; aot's variants were keyed without the inputs' aliasing (and symbolic example
    # values never alias), so t1 silently kept its old value
    def f(w, t1):
        w += w.tanh()
        return t1 + t1

    ember.reset()
    compiled = ember.compile(f, backend="aot_eager")
    for n, alias in ((4, False), (4, True), (5, True), (6, False), (7, True)):
        torch.manual_seed(n)
        w = torch.randn(n)
        w2 = w.clone()

        def view(t, alias=alias):
            return t[0].unsqueeze(0) if alias else t[0].unsqueeze(0).clone()

        want, got = f(w, view(w)), compiled(w2, view(w2))
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(w2, w)
    assert not ember.counters["graph_fallbacks"]
    assert ember.counters["aot_eager"]["forward_runs"] == 5


def test_multihead_attention_inference_takes_the_traceable_path_through_inductor(
    tmp_path, monkeypatch
):
    # eval + no_grad sends nn.MultiheadAttention to aten's fused kernel, whose undefined
    # attention weights (None in eager) crashed the fallback's wrapper; a trace now answers
    # torch's "make_fx tracing" query as a tracer, as torch intends: the traceable path,
    # made contiguous like the fused kernel's output, compiled (no aten fallback)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    attention = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    x = torch.randn(2, 7, 32)

    def f(x):
        return attention(x, x, x, need_weights=False)

    ember.reset()
    with torch.no_grad():
        (got, got_weights), (want, want_weights) = ember.compile(f, backend="inductor")(x), f(x)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride() and got_weights is None and want_weights is None
    assert not ember.counters["aten_fallbacks"]
    assert ember.counters["inductor"]["forward_runs"] >= 1


def test_transformer_encoder_inference_compiles_through_inductor(tmp_path, monkeypatch):
    # eval + no_grad sends each nn.TransformerEncoderLayer to aten's fused layer kernel: it
    # ran as an opaque aten call (no Ember kernel at all); decomposed, the layers compile
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(2, 7, 32)
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[1, 4:] = True
    ember.reset()
    with torch.no_grad():
        got = ember.compile(encoder, backend="inductor")(x, src_key_padding_mask=padding)
        want = encoder(x, src_key_padding_mask=padding)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not ember.counters["aten_fallbacks"]
    assert ember.counters["inductor"]["kernels"] > 0


def _halo_windows(x, w):
    # eca_halonext26ts's halo attention: overlapping blocks of a padded map (unfold twice)
    blocks = F.pad(x * w, [1, 1, 1, 1]).unfold(2, 4, 2).unfold(3, 4, 2)
    return blocks.square().sum()


def _resized_features(x, w):
    # CrossViT's input resize (bicubic), then a channels-last upsampling's gradient
    image = F.interpolate(x, size=(11, 13), mode="bicubic", align_corners=False)
    up = F.interpolate((image * w).to(memory_format=torch.channels_last), scale_factor=3)
    return (up * up.tanh()).sum()


def _average_pools(x, w):
    y = F.avg_pool2d(x * w, 3, 1, 1)  # Inception's: one divisor for every window
    y = F.avg_pool2d(y, 3, 2, 0, ceil_mode=True)  # windows cut short: their own counts
    return F.avg_pool3d(y.unsqueeze(1), 2, 1, 1, count_include_pad=False).sum()


@pytest.mark.parametrize("program", [_halo_windows, _resized_features, _average_pools])
def test_decomposed_resampling_gradients_through_inductor(program, tmp_path, monkeypatch):
    # unfold's, nearest upsampling's and average pooling's backward and the bicubic resize
    # were aten kernels; decomposed, each compiles (no aten fallback) and matches eager
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 10)
    w = torch.randn(1, 3, 1, 1, requires_grad=True)
    w_twin = w.detach().clone().requires_grad_(True)
    ember.reset()
    got = ember.compile(program, backend="inductor")(x, w_twin)
    want = program(x, w)
    got.backward()
    want.backward()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(w_twin.grad, w.grad, rtol=1e-4, atol=1e-5)
    assert not ember.counters["aten_fallbacks"]
    assert ember.counters["inductor"]["backward_runs"] == 1
