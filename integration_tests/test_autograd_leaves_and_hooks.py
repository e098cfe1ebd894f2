"""Autograd state that lives outside a compiled graph (issue 26): leaves made inside the
compiled function, saved-tensor hooks around it, and a custom Function's ctx buffers. Each
case runs under the eager, aot_eager and default inductor backends and is compared with eager
PyTorch; `ember.explain` pins the graph count so that a silent fallback fails."""

from __future__ import annotations

import pytest
import torch

import ember

BACKENDS = ["eager", "aot_eager", "inductor"]


pytestmark = pytest.mark.usefixtures("private_ember_cache")


def graphs_and_breaks(fn, args, backend):
    ember.reset()
    out = ember.explain(fn, backend=backend)(*args)
    ember.reset()
    return out.graph_count, out.graph_break_count


# ---- leaves requiring grad created inside the compiled function ----------------------------


def factory_leaf(x):
    w = torch.ones(3, requires_grad=True)
    return w * x, w


def full_leaf_sum_only(x):
    w = torch.full((3,), 2.0, requires_grad=True)
    return (w * x).sin().sum()


def requires_grad_on_intermediate(x):
    w = (x * 2).detach().requires_grad_()
    return w * x + 1, w


def requires_grad_true_on_fresh(x):
    w = torch.zeros(3).requires_grad_(True)
    return (w + x).cos(), w


def literal_tensor_leaf(x):
    w = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    return w * x, w


def parameter_built_inside(x):
    w = torch.nn.Parameter(torch.ones(3) * 3)
    return w * x, w


def attribute_requires_grad(x):
    w = torch.ones(3)
    w.requires_grad = True
    return w.exp() * x, w


# case -> graphs: the op making the leaf runs eagerly at a break, with a graph after it
# and one before it where ops come first
LEAF_CASES = {
    factory_leaf: 1,
    full_leaf_sum_only: 1,
    requires_grad_on_intermediate: 2,
    requires_grad_true_on_fresh: 2,
    literal_tensor_leaf: 1,
    parameter_built_inside: 2,
    attribute_requires_grad: 2,
}


def _as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def _leaf_facts(outputs):
    return [(o.requires_grad, o.is_leaf, o.grad_fn is not None, type(o)) for o in outputs]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", LEAF_CASES, ids=lambda f: f.__name__)
def test_leaf_made_inside_matches_eager(fn, backend):
    x = torch.randn(3)
    expected = _as_tuple(fn(x))
    got = _as_tuple(ember.compile(fn, backend=backend)(x))
    assert _leaf_facts(got) == _leaf_facts(expected)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g.detach(), e.detach())
    expected[0].sum().backward()
    got[0].sum().backward()
    for g, e in zip(got[1:], expected[1:], strict=True):  # the returned leaves
        assert g.grad is not None
        torch.testing.assert_close(g.grad, e.grad)
    assert graphs_and_breaks(fn, (x,), backend) == (LEAF_CASES[fn], 1)


def _leaf_under_no_grad(x):
    with torch.no_grad():
        w = torch.ones(3, requires_grad=True)
    return w * x, w


@pytest.mark.parametrize("backend", BACKENDS)
def test_leaf_made_under_no_grad_still_requires_grad(backend):
    x = torch.randn(3)
    expected = _leaf_under_no_grad(x)
    got = ember.compile(_leaf_under_no_grad, backend=backend)(x)
    assert _leaf_facts(got) == _leaf_facts(expected)
    got[0].sum().backward()
    expected[0].sum().backward()
    torch.testing.assert_close(got[1].grad, expected[1].grad)


def _no_leaf_made(x, p):
    y = p.requires_grad_(True)  # already a leaf requiring grad: nothing changes
    z = torch.ones(3, requires_grad=False)
    return y * x + z


@pytest.mark.parametrize("backend", BACKENDS)
def test_requires_grad_without_a_new_leaf_stays_one_graph(backend):
    x, p = torch.randn(3), torch.randn(3, requires_grad=True)
    p_eager = p.detach().clone().requires_grad_()
    expected = _no_leaf_made(x, p_eager)
    got = ember.compile(_no_leaf_made, backend=backend)(x, p)
    torch.testing.assert_close(got, expected)
    got.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(p.grad, p_eager.grad)
    assert graphs_and_breaks(_no_leaf_made, (x, p), backend) == (1, 0)


# ---- saved-tensor hooks around the compiled call ------------------------------------------


def _sin_cos_chain(x, w):
    return (x.sin() @ w).cos().sum()


def _grads_of(fn, x, w):
    x, w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    out = fn(x, w)
    out.backward()
    return out.detach(), x.grad, w.grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_under_disabled_saved_tensor_hooks(backend):
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    compiled = ember.compile(_sin_cos_chain, backend=backend)
    with torch.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
        expected = _grads_of(_sin_cos_chain, x, w)
        for _ in range(2):
            got = _grads_of(compiled, x, w)
            for g, e in zip(got, expected, strict=True):
                torch.testing.assert_close(g, e)
        # the caller's state is left as it was: pushing hooks still raises its message
        hooks = torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)
        with pytest.raises(RuntimeError, match="no hooks here"), hooks:
            pass
    assert torch._C._autograd._saved_tensors_hooks_is_enabled()
    assert graphs_and_breaks(_sin_cos_chain, (x, w), backend) == (1, 0)


class _Recorder:
    def __init__(self) -> None:
        self.packed: list[torch.Tensor] = []
        self.unpacked = 0

    def pack(self, t):
        self.packed.append(t)
        return ("packed", t)

    def unpack(self, packed):
        self.unpacked += 1
        return packed[1]

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


def _matmul_sum(x, w):
    return (x @ w).sum() * 2


def _packs_of_one_step(fn, x, w):
    recorder = _Recorder()
    with recorder.hooks():
        out, gx, gw = _grads_of(fn, x, w)
    return recorder, (out, gx, gw)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_matmul_sum, _sin_cos_chain], ids=lambda f: f.__name__)
def test_user_pack_hook_is_not_called_while_tracing(fn, backend):
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    eager_hooks, expected = _packs_of_one_step(fn, x, w)
    compiled = ember.compile(fn, backend=backend)
    first, got = _packs_of_one_step(compiled, x, w)  # traces and compiles, then runs
    second, _ = _packs_of_one_step(compiled, x, w)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
    # the hooks see real tensors only, once per tensor the compiled graph saves, on the
    # compiling call as on later ones; the backward unpacks each
    assert all(type(t) is torch.Tensor for t in first.packed)
    assert len(first.packed) == len(second.packed) > 0
    assert first.unpacked == len(first.packed)
    if fn is _matmul_sum and backend != "aot_eager":
        # x and w are all the backward needs: eager's count (and torch.compile's)
        assert len(first.packed) == len(eager_hooks.packed) == 2
    assert graphs_and_breaks(fn, (x, w), backend) == (1, 0)


# ---- an autograd.Function keeping a tensor on ctx and writing it in backward -------------


class _ScaledByStash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.buf = t.clone()
        return t * 3

    @staticmethod
    def backward(ctx, grad):
        ctx.buf.mul_(2)
        return grad * ctx.buf + 1


def _uses_stash(x, w):
    return (_ScaledByStash.apply(x.sin()) * w).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_function_mutating_its_ctx_buffer_in_backward(backend):
    x, w = torch.randn(5), torch.randn(5)
    expected = _grads_of(_uses_stash, x, w)
    compiled = ember.compile(_uses_stash, backend=backend)
    for _ in range(2):
        got = _grads_of(compiled, x, w)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e)
    assert graphs_and_breaks(_uses_stash, (x.requires_grad_(), w), backend) == (1, 0)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_views_of_parameters_under_no_grad_stay_in_one_graph(backend):
    """Under no_grad a view of a parameter requires grad with no grad_fn (it looks like a
    leaf) but is none: no graph break (timm's ViT and ConvNeXt broke at each such view)."""

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gamma = torch.nn.Parameter(torch.randn(4))
            self.token = torch.nn.Parameter(torch.randn(1, 1, 4))

        def forward(self, x):
            token = self.token.expand(x.shape[0], -1, -1)
            return torch.cat([token, x * self.gamma.reshape(1, 1, -1)], dim=1)

    model = Scaled()
    compiled = ember.compile(model, backend=backend)
    x = torch.randn(2, 3, 4)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    records = compiled._ember_compiler.records
    assert len(records) == 1 and not [b for r in records for b in r.breaks]


# ---- Tensor.retain_grad() on an input that is not a leaf ------------------------------------


def keeps_grad_of_input(x, y):
    y.retain_grad()
    return torch.sin(y) * x


@pytest.mark.parametrize("backend", BACKENDS)
def test_retain_grad_on_a_non_leaf_input(backend):
    def run(fn):
        x = torch.randn(4, requires_grad=True)
        y = torch.cos(x)
        fn(x, y).sum().backward()
        return y.retains_grad, y.grad, x.grad

    torch.manual_seed(0)
    expected = run(keeps_grad_of_input)
    torch.manual_seed(0)
    got = run(ember.compile(keeps_grad_of_input, backend=backend))
    assert got[0] is True and got[1] is not None
    torch.testing.assert_close(got[1:], expected[1:])
    x = torch.randn(4, requires_grad=True)
    assert graphs_and_breaks(keeps_grad_of_input, (x, torch.cos(x)), backend)[0] >= 1
