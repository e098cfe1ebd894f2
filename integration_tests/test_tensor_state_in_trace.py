"""Python-side state of tensors inside one compiled graph (issue 26): attributes the code
sets on tensors (inputs and tensors the graph makes), `.grad` of tensors made in the
function, `.data` reads, functions stored on a tensor, and `torch._check` failing. Each case
runs under the eager and the default inductor backends, is compared with eager PyTorch, and
pins one graph with no break (fullgraph=True), so a silent fallback fails."""

from __future__ import annotations

import pytest
import torch

import ember

BACKENDS = ["eager", "inductor"]


pytestmark = pytest.mark.usefixtures("private_ember_cache")


def one_graph(fn, args, backend):
    """fn compiled with fullgraph=True; asserts one graph and no break, returns its result."""
    ember.reset()
    explained = ember.explain(fn, backend=backend)(*args)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    ember.reset()
    return ember.compile(fn, backend=backend, fullgraph=True)(*args)


# ---- attributes set on tensors -----------------------------------------------------------


def tag_made_tensor(x):
    out = x * 3 - 1
    out.grad = x  # a gradient slot set by hand, read back below
    out.label = "scaled"
    return out, out.label, out.grad is x


def tag_input(x, flag):
    x.marked = flag
    return x.cos(), x.marked


def tag_through_list(x):
    kept = [x.sin()]
    kept[0].note = 7
    return kept, kept[0].note + 1


def tag_in_place_result(x):
    y = x.mul_(2)  # the same object as x
    y.seen = True
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_on_a_made_tensor_is_on_the_returned_tensor(backend):
    x = torch.randn(4)
    got, label, same_grad = one_graph(tag_made_tensor, (x,), backend)
    ref, ref_label, ref_same = tag_made_tensor(x)
    assert torch.allclose(got, ref) and (label, same_grad) == (ref_label, ref_same)
    assert got.label == "scaled" and got.grad is x


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_on_an_input_tensor_is_set_on_the_callers_tensor(backend):
    x = torch.randn(4)
    got, flag = one_graph(tag_input, (x, 5), backend)
    assert torch.allclose(got, x.cos()) and flag == 5 and x.marked == 5
    ember.reset()
    compiled = ember.compile(tag_input, backend=backend, fullgraph=True)
    compiled(x, 1)
    compiled(x, 2)  # another value: a guard, not the first call's constant
    assert x.marked == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_reaches_the_tensor_through_a_container(backend):
    x = torch.randn(3)
    kept, note = one_graph(tag_through_list, (x,), backend)
    assert kept[0].note == 7 and note == 8 and torch.allclose(kept[0], x.sin())


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_on_the_result_of_an_in_place_op_lands_on_the_input(backend):
    x, ref_x = torch.randn(3), None
    ref_x = x.clone()
    got = one_graph(tag_in_place_result, (x,), backend)
    assert x.seen is True
    assert torch.allclose(got, ref_x * 4 + 1)  # one_graph ran it twice: x doubled twice


def probe_written_attributes(x):
    y = x + 1
    before = hasattr(x, "tag"), hasattr(y, "tag")
    y.tag = 3
    x.other = 4
    after = hasattr(y, "tag"), getattr(y, "tag", 8), hasattr(x, "other"), getattr(x, "tag", 7)
    return y, before, after


@pytest.mark.parametrize("backend", BACKENDS)
def test_hasattr_and_getattr_see_attributes_written_in_the_trace(backend):
    x = torch.randn(2)
    expected = probe_written_attributes(x)[1:]
    del x.other
    got = one_graph(probe_written_attributes, (x,), backend)
    assert got[1:] == expected == ((False, False), (True, 3, True, 7))
    assert got[0].tag == 3 and x.other == 4


def set_requires_grad_attr(x):
    y = x + 1
    y.names = None
    return y


def bad_grad_size(x):
    y = x + 1
    y.grad = torch.ones(2)
    return y


@pytest.mark.parametrize("fn", [set_requires_grad_attr, bad_grad_size])
def test_tensor_attributes_it_does_not_model_break_and_match_eager(fn):
    x = torch.randn(3)
    try:
        expected = fn(x)
    except RuntimeError as err:
        with pytest.raises(RuntimeError, match=str(err)[:20]):
            ember.compile(fn, backend="eager")(x)
        return
    assert torch.allclose(ember.compile(fn, backend="eager")(x), expected)


# ---- .grad of tensors the function made, .data, functions stored on a tensor ---------------


def grad_of_made_tensors(a):
    fresh = torch.zeros(2, 2)
    mid = a * fresh + 1
    return mid.sum(), fresh.grad, mid.grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_of_tensors_made_in_the_function_is_none(backend):
    a = torch.ones(2, 2, requires_grad=True)
    total, fresh_grad, mid_grad = one_graph(grad_of_made_tensors, (a,), backend)
    assert fresh_grad is None and mid_grad is None
    assert torch.allclose(total, grad_of_made_tensors(a)[0])


def index_with_data(x, idx):
    alias = x.data
    return x[idx.data] * 2, alias, alias.requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_read_is_a_detached_alias(backend):
    x = torch.randn(6, requires_grad=True)
    idx = torch.tensor([0, 2, 5])
    got, alias, flag = one_graph(index_with_data, (x, idx), backend)
    ref, ref_alias, ref_flag = index_with_data(x, idx)
    assert torch.allclose(got, ref) and torch.equal(alias, ref_alias) and flag == ref_flag
    assert not alias.requires_grad and got.requires_grad


def detached_views(x):
    return x.detach(), x.detach()[1:], x[1:]


@pytest.mark.parametrize("backend", BACKENDS)
def test_detached_aliases_of_an_input_leave_without_history(backend):
    x = torch.randn(5, requires_grad=True)
    got = ember.compile(detached_views, backend=backend, fullgraph=True)(x)
    for g, r in zip(got, detached_views(x), strict=True):
        assert torch.equal(g, r) and g.requires_grad == r.requires_grad
    got[2].sum().backward()  # the plain view still reaches x
    assert torch.equal(x.grad, torch.tensor([0.0, 1, 1, 1, 1]))


def data_twice(p):
    alias = p.data
    return alias, alias, p.data * 2


def sgd_through_data(p, g):
    p.data.add_(g, alpha=-0.1)
    return p * 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_alias_leaves_with_its_own_version_counter(backend):
    p = torch.randn(3, requires_grad=True)
    first, second, doubled = one_graph(data_twice, (p,), backend)
    assert first is second and not first.requires_grad and torch.allclose(doubled, p * 2)
    version = p._version
    first.add_(1)  # a write through .data: p's version stays, as in eager
    assert p._version == version and torch.equal(first, p.detach())


@pytest.mark.parametrize("backend", BACKENDS)
def test_write_through_data_keeps_saved_tensors_valid(backend):
    p, g = torch.randn(3, requires_grad=True), torch.randn(3)
    p_ref = p.detach().clone().requires_grad_()
    loss, loss_ref = (p * p).sum(), (p_ref * p_ref).sum()  # both save their p
    got = ember.compile(sgd_through_data, backend=backend)(p, g)
    expected = sgd_through_data(p_ref, g)
    loss.backward()  # eager allows it: the write went through .data
    loss_ref.backward()
    assert torch.allclose(got, expected) and torch.allclose(p.grad, p_ref.grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_read_under_inference_mode(backend):
    with torch.inference_mode():
        x = torch.randn(3)
        got = one_graph(lambda t: t.data + 1, (x,), backend)
    assert torch.allclose(got, x + 1)


HOLDER = torch.nn.Parameter(torch.ones(2))


def call_stored_function(x):
    return HOLDER.scale(HOLDER) + x


@pytest.mark.parametrize("backend", BACKENDS)
def test_function_stored_on_a_tensor_is_called_and_guarded(backend):
    HOLDER.scale = lambda t: t * 3
    x = torch.randn(2)
    assert torch.allclose(one_graph(call_stored_function, (x,), backend), x + 3)
    HOLDER.scale = lambda t: t * 5  # another function: the guard on it fails, a new trace
    compiled = ember.compile(call_stored_function, backend=backend, fullgraph=True)
    assert torch.allclose(compiled(x), x + 5)
    del HOLDER.scale  # gone: the guard fails, and eager's AttributeError, not a stale call
    with pytest.raises(AttributeError, match="scale"):
        ember.compile(call_stored_function, backend=backend)(x)


# ---- torch._check whose predicate is false ---------------------------------------------


def checked(x):
    torch._check(x.shape[0] > 3, lambda: "needs more than three rows")
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_failing_check_raises_eagers_runtime_error_under_fullgraph(backend):
    compiled = ember.compile(checked, backend=backend, fullgraph=True)
    for _ in range(2):  # every call, not only the first
        with pytest.raises(RuntimeError, match="needs more than three rows"):
            compiled(torch.randn(3))
    assert torch.allclose(compiled(x := torch.randn(5)), x + 1)


# ---- legacy tensor types called with data ------------------------------------------------


def legacy_constructors(a):
    offsets = torch.LongTensor([294, -3]).to(a.device)
    weights = torch.FloatTensor([[0.5, 1.5], [2.0, -1.0]])
    flags = torch.BoolTensor([0, 2])
    return a - offsets, weights @ a.float(), flags


@pytest.mark.parametrize("backend", BACKENDS)
def test_legacy_tensor_type_with_data_is_a_tensor_of_its_dtype(backend):
    a = torch.randint(0, 999, (2, 2))
    got = one_graph(legacy_constructors, (a,), backend)
    for g, r in zip(got, legacy_constructors(a), strict=True):
        assert torch.equal(g, r) and g.dtype == r.dtype


def legacy_overflow(a):
    return torch.ByteTensor([300]) + a


def legacy_sizes(a):
    return torch.FloatTensor(2, 3).shape, a + 1  # uninitialized memory: not modeled


@pytest.mark.parametrize("backend", BACKENDS)
def test_legacy_tensor_type_forms_it_does_not_model_match_eager(backend):
    a = torch.ones(1, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="overflow"):
        legacy_overflow(a)
    with pytest.raises(RuntimeError, match="overflow"):
        ember.compile(legacy_overflow, backend=backend)(a)
    shape, plus = ember.compile(legacy_sizes, backend=backend)(a)
    assert shape == (2, 3) and torch.equal(plus, a + 1)


# ---- autograd leaves made in the function, and backward() into them ----------------------


def leaf_grad_used(x):
    y = x.cos()
    y.requires_grad_()
    (y * y * 0.5).sum().backward()
    return y.grad * 3 - 1, y.requires_grad and y.is_leaf


def leaf_grad_accumulates(x):
    y = x * 2
    y.requires_grad_()
    (y * 4).sum().backward(retain_graph=True)
    first = y.grad
    (y.exp()).sum().backward()
    return first.clone(), y.grad, first is y.grad


def leaf_chunks(x):
    y = (x + 1).detach().requires_grad_()
    total = torch.zeros(())
    for part in y.split(2):
        loss = (part.tanh() ** 2).mean()
        loss.backward()
        total = total + loss.detach()
    return y.grad, total


STORE = {}


def leaf_grad_stored(x):
    y = x - 1
    y.requires_grad_()
    (y**3).sum().backward(torch.tensor(2.0))
    STORE["g"] = y.grad
    return y.grad + 0, (y * 2).detach()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn", [leaf_grad_used, leaf_grad_accumulates, leaf_chunks, leaf_grad_stored]
)
def test_backward_into_a_leaf_made_in_the_function_is_one_graph(fn, backend):
    x = torch.randn(4, 3)
    expected = fn(x)
    expected_store = STORE.pop("g", None)
    got = one_graph(fn, (x,), backend)
    for g, r in zip(got, expected, strict=True):
        if isinstance(r, torch.Tensor):
            assert torch.allclose(g, r) and g.requires_grad == r.requires_grad
        else:
            assert g == r
    if expected_store is not None:
        assert torch.allclose(STORE.pop("g"), expected_store)


def leaf_returned(x):
    y = x.sin() * 2
    y.requires_grad_()
    return y * 3  # carries the leaf's history: the leaf is eager's, at a graph break


def backward_reaches_an_input(x, w):
    y = (x * 2).requires_grad_()
    (y * w).sum().backward()  # w's gradient is the caller's tensor's
    return y.grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_leaf_history_leaving_the_graph_breaks_at_requires_grad(backend):
    x = torch.randn(3)
    explained = ember.explain(leaf_returned, backend=backend)(x)
    assert explained.graph_break_count == 1
    ember.reset()
    got = ember.compile(leaf_returned, backend=backend)(x)
    assert got.requires_grad and got.grad_fn is not None
    assert torch.allclose(got, leaf_returned(x))


def test_leaf_history_leaving_under_fullgraph_names_the_leaf_and_detach():
    with pytest.raises(Exception, match=r"(?s)y\.requires_grad_\(\).*\.detach\(\)") as info:
        ember.compile(leaf_returned, backend="inductor", fullgraph=True)(torch.randn(3))
    assert "fullgraph" in str(info.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_reaching_an_input_requiring_grad_stays_eagers(backend):
    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    w_ref = w.detach().clone().requires_grad_()
    expected = backward_reaches_an_input(x, w_ref)
    got = ember.compile(backward_reaches_an_input, backend=backend)(x, w)
    assert torch.allclose(got, expected) and torch.allclose(w.grad, w_ref.grad)


def backward_twice_without_retain(x):
    y = x * 2
    y.requires_grad_()
    z = (y.exp()).sum()
    z.backward()
    z.backward()
    return y.grad


def test_second_backward_without_retain_graph_raises_eagers_error():
    x = torch.randn(3)
    with pytest.raises(RuntimeError, match="second time"):
        backward_twice_without_retain(x)
    with pytest.raises(RuntimeError, match="second time"):
        ember.compile(backward_twice_without_retain, backend="inductor")(x)


def sparse_result(x):
    return (x * 2).to_sparse(), x.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_outputs_still_leave_the_graph(backend):
    x = torch.randn(3, 3)
    got = ember.compile(sparse_result, backend=backend)(x)
    expected = sparse_result(x)
    assert got[0].layout == torch.sparse_coo
    assert torch.equal(got[0].to_dense(), expected[0].to_dense())
    assert torch.allclose(got[1], expected[1])
