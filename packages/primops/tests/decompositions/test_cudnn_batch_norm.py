"""The batch-norm ops aten picks on CUDA (`cudnn_batch_norm` for `F.batch_norm`,
`batch_norm_backward` / `cudnn_batch_norm_backward` for the gradients) decompose like aten's
own kernel: left as library calls they were one cuDNN call per norm that nothing fused with
(53 in ResNet-50's inference on an H100, plus a layout copy each when channels-last).
Checked on CPU tensors through DecomposeMode against aten's native kernels."""

from __future__ import annotations

import pytest
import torch

from ember_primops.decompose_mode import DecomposeMode

aten = torch.ops.aten


def _case(shape=(4, 6, 5, 5), seed=0):
    gen = torch.Generator().manual_seed(seed)
    c = shape[1]
    x = torch.randn(shape, generator=gen) * 2 + 0.5
    weight, bias = torch.randn(c, generator=gen), torch.randn(c, generator=gen)
    running_mean, running_var = torch.randn(c, generator=gen), torch.rand(c, generator=gen) + 0.5
    return x, weight, bias, running_mean, running_var


def _decomposed(op, *args):
    mode = DecomposeMode(strict=True)
    with mode:
        out = op(*args)
    assert str(op) in {str(k) for k in mode.decomposed_counts}, mode.decomposed_counts
    return out


@pytest.mark.parametrize("training", [False, True])
def test_cudnn_batch_norm_is_the_native_kernel(training):
    x, w, b, rm, rv = _case()
    want_stats = (rm.clone(), rv.clone())
    want = aten.native_batch_norm(x, w, b, *want_stats, training, 0.1, 1e-5)
    got_stats = (rm.clone(), rv.clone())
    got = _decomposed(aten.cudnn_batch_norm.default, x, w, b, *got_stats, training, 0.1, 1e-5)
    torch.testing.assert_close(got[0], want[0])
    if training:  # the batch's statistics, and the running ones updated in place
        torch.testing.assert_close(got[1], want[1])
        torch.testing.assert_close(got[2], want[2])
    for g, e in zip(got_stats, want_stats, strict=True):
        torch.testing.assert_close(g, e)
    assert got[3].dtype == torch.uint8  # cuDNN's reserve space: nothing the decomposition needs


@pytest.mark.parametrize("update", [True, False])
def test_batch_norm_backward_is_the_native_backward(update):
    x, w, b, rm, rv = _case(seed=1)
    g = torch.randn_like(x)
    _, mean, invstd = aten.native_batch_norm(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
    mask = [True, True, True]
    want = aten.native_batch_norm_backward(g, x, w, rm, rv, mean, invstd, update, 1e-5, mask)
    reserve = torch.empty(0, dtype=torch.uint8)
    got = _decomposed(
        aten.batch_norm_backward.default, g, x, w, rm, rv, mean, invstd, update, 1e-5, mask,
        reserve,
    )  # fmt: skip
    for a, e in zip(got, want, strict=True):
        torch.testing.assert_close(a, e)
    if update:
        cudnn = _decomposed(
            aten.cudnn_batch_norm_backward.default, x, g, w, rm, rv, mean, invstd, 1e-5, reserve
        )
        for a, e in zip(cudnn, want, strict=True):
            torch.testing.assert_close(a, e)


@pytest.mark.skipif(
    not torch.backends.cuda.is_built(),
    reason="fake CUDA tensors need torch's CUDA build (run under /work/venv312)",
)
def test_f_batch_norm_on_cuda_reaches_the_decomposition():
    """On CUDA fakes (no GPU needed) inference batch norm dispatches cudnn_batch_norm."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake = FakeTensorMode()
    with fake:
        x, w = torch.empty(4, 8, 6, 6, device="cuda"), torch.ones(8, device="cuda")
    decompose = DecomposeMode(strict=False)  # prim.device and such run as they are
    with fake, decompose:
        torch.nn.functional.batch_norm(x, w, w, w, w, training=False)
    assert "aten.cudnn_batch_norm.default" in {str(k) for k in decompose.decomposed_counts}
