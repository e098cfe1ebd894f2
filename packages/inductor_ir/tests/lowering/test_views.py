"""Views are index maps: no copy nodes, correct values, outputs as strided views."""

import torch

from ember_inductor_ir.nodes import ComputedBuffer
from ember_primops import prims


def _computed(lowering):
    return [op for op in lowering.operations if isinstance(op, ComputedBuffer)]


def test_view_chain_makes_no_copies(check):
    x = torch.randn(4, 6)

    def f(a):
        v = prims.permute(a, [1, 0])
        v = prims.slice(v, [1, 0], [5, 4], [2, 1])
        v = prims.expand_dims(v, [0])
        v = prims.broadcast_in_dim(prims.squeeze(v, [0]), [3, 2, 4], [1, 2])
        v = prims.reshape(v, [6, 4])
        return (prims.add(v, v),)

    lowering, sched = check(f, x)
    assert len(_computed(lowering)) == 1  # only the add: every view was an index map
    assert len(sched) == 1


def test_output_view_of_input_is_not_copied(check):
    x = torch.randn(4, 6)
    lowering, _sched = check(lambda a: (prims.permute(a, [1, 0]),), x)
    assert lowering.operations == []
    assert lowering.graph_outputs[0].name == lowering.graph_inputs[0]


def test_reshape_round_trip_folds_index(check):
    x = torch.randn(4, 6)

    def f(a):
        flat = prims.reshape(prims.exp(a), [24])
        return (prims.reshape(prims.add(flat, flat), [4, 6]), flat)

    check(f, x)


def test_split_collapse_and_as_strided(check):
    x = torch.randn(4, 6)

    def f(a):
        s = prims.split_dim(a, 1, 2)
        c = prims.collapse_view(s, 0, 2)
        st = prims.as_strided(a, [3, 3], [6, 2], 1)
        return (prims.neg(c), prims.neg(st))

    check(f, x)


def test_as_strided_of_views_over_a_computed_value(check):
    # stft's frames: as_strided over unsqueeze(squeeze(<computed>)) reads the computed
    # value's buffer (realized under the views), not a copy or nothing
    x = torch.randn(1, 1, 20)

    def f(a):
        v = prims.expand_dims(prims.squeeze(prims.exp(a), [0, 1]), [0])
        return (prims.neg(prims.as_strided(v, [1, 5, 4], [20, 3, 1], 1)),)

    check(f, x)


def test_rev_and_strided_input(check):
    x = torch.randn(6, 4).t()  # non-contiguous input layout
    check(lambda a: (prims.rev(prims.sin(a), [0]),), x)


def test_reshape_of_an_empty_tensor(check):
    # Unflattening over a zero-size dim used to divide by zero while simplifying indices.
    def f(a):
        return (prims.reshape(prims.exp(a), [0, 5]), prims.collapse_view(prims.exp(a), 1, 3))

    check(f, torch.randn(5, 0, 0))
