"""Every guard kind passes on the value it was made from and fails on each single change."""

from __future__ import annotations

import collections
import math
from typing import Any

import pytest
import torch

from ember_bytecode_tracer.guards import (
    AttrSource,
    GlobalSource,
    Guard,
    GuardKind,
    ItemSource,
    LocalSource,
    TensorSpec,
    TypeSource,
    compile_guards,
)

V = LocalSource("v")


def passes(guard: Guard, value: Any, **more_locals: Any) -> bool:
    compiled = compile_guards([guard], {})
    result = compiled({"v": value, **more_locals})
    # the slow path must agree with the generated code
    assert (compiled.failure_reason({"v": value, **more_locals}) is None) == result
    return result


def assert_guard(kind: GuardKind, seen: Any, same: list[Any], different: list[Any]) -> None:
    guard = Guard.from_value(V, kind, seen)
    assert passes(guard, seen)
    for value in same:
        assert passes(guard, value), value
    for value in different:
        assert not passes(guard, value), value


class SubTensor(torch.Tensor):
    pass


def test_type_match() -> None:
    assert_guard(GuardKind.TYPE_MATCH, 1, same=[2, -5], different=[True, 1.0, "1", None])
    assert_guard(GuardKind.TYPE_MATCH, True, same=[False], different=[1])
    assert_guard(
        GuardKind.TYPE_MATCH,
        collections.OrderedDict(),
        same=[collections.OrderedDict(a=1)],
        different=[{}],
    )


def test_id_match() -> None:
    obj = [1, 2]
    assert_guard(GuardKind.ID_MATCH, obj, same=[], different=[[1, 2], None])
    assert_guard(GuardKind.ID_MATCH, torch.nn.functional.relu, same=[], different=[torch.relu])


@pytest.mark.parametrize(
    ("seen", "same", "different"),
    [
        (1, [], [True, 1.0, 2, "1", None]),
        (True, [], [1, False, 1.0]),
        (False, [], [0, None, 0.0]),
        (1.0, [], [1, True, 1.0000001]),
        (0.0, [], [-0.0, 0, False]),
        (float("nan"), [math.nan], [0.0, float("inf")]),
        (float("inf"), [], [float("-inf"), 1e308]),
        (1 + 2j, [], [1, 1 + 3j]),
        ("a", [], ["b", b"a", None]),
        (b"a", [], ["a"]),
        (None, [], [0, False, ""]),
        ((1, 2), [], [(1, True), (1.0, 2), [1, 2], torch.Size([1, 2]), (1, 2, 3)]),
        ((1, ("a", 2.5)), [], [(1, ("a", 2)), (1, ["a", 2.5]), (True, ("a", 2.5))]),
        ((), [], [[], (1,)]),
        (frozenset({1, 2}), [], [frozenset({1, 3}), frozenset({True, 2}), {1, 2}]),
        (torch.float32, [], [torch.float64, "float32", None]),
        (torch.device("cpu"), [], [torch.device("meta"), "cpu"]),
        (torch.Size([2, 3]), [], [(2, 3), torch.Size([3, 2])]),
        (torch.strided, [], [torch.sparse_coo]),
        (slice(1, None, 2), [], [slice(1, None, 1), slice(True, None, 2)]),
        (Ellipsis, [], [None]),
    ],
)
def test_equals_match(seen: Any, same: list[Any], different: list[Any]) -> None:
    assert_guard(GuardKind.EQUALS_MATCH, seen, same=same, different=different)


def test_equals_rejects_mutable_and_opaque_values() -> None:
    with pytest.raises(TypeError, match="immutable constant"):
        Guard(V, GuardKind.EQUALS_MATCH, [1, 2])
    with pytest.raises(TypeError, match="immutable constant"):
        Guard(V, GuardKind.EQUALS_MATCH, (1, object()))


def test_none_and_not_none() -> None:
    assert passes(Guard(V, GuardKind.NONE_MATCH), None)
    for value in (0, False, "", []):
        assert not passes(Guard(V, GuardKind.NONE_MATCH), value)
        assert passes(Guard(V, GuardKind.NOT_NONE), value)
    assert not passes(Guard(V, GuardKind.NOT_NONE), None)


def tensor_guard(t: torch.Tensor) -> Guard:
    return Guard.from_value(V, GuardKind.TENSOR_MATCH, t)


def test_tensor_match_passes_on_equal_metadata() -> None:
    t = torch.randn(2, 3)
    guard = tensor_guard(t)
    assert passes(guard, t)
    assert passes(guard, torch.zeros(2, 3))
    assert passes(tensor_guard(torch.tensor(1.5)), torch.tensor(2.0))
    assert passes(tensor_guard(t.to("meta")), torch.empty(2, 3, device="meta"))


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(torch.randn(2, 3, dtype=torch.float64), id="dtype"),
        pytest.param(torch.randn(2, 3, device="meta"), id="device"),
        pytest.param(torch.randn(2, 3, requires_grad=True), id="requires_grad"),
        pytest.param(torch.randn(2, 4), id="size"),
        pytest.param(torch.randn(2, 3, 1), id="ndim"),
        pytest.param(torch.randn(3, 2).t(), id="stride"),
        pytest.param(torch.randn(2, 3).as_subclass(SubTensor), id="subclass"),
        pytest.param(torch.nn.Parameter(torch.randn(2, 3)), id="parameter"),
        pytest.param(torch.randn(2, 3).to_sparse(), id="layout"),
        pytest.param([[0.0] * 3] * 2, id="not-a-tensor"),
        pytest.param(None, id="none"),
    ],
)
def test_tensor_match_fails_on_each_difference(other: Any) -> None:
    assert not passes(tensor_guard(torch.randn(2, 3)), other)


def test_tensor_match_parameter_and_subclass_are_exact() -> None:
    p = torch.nn.Parameter(torch.randn(2, 3))
    assert passes(tensor_guard(p), torch.nn.Parameter(torch.randn(2, 3)))
    assert not passes(tensor_guard(p), p.detach().requires_grad_())
    sub = torch.randn(2, 3).as_subclass(SubTensor)
    assert passes(tensor_guard(sub), torch.zeros(2, 3).as_subclass(SubTensor))
    assert not passes(tensor_guard(sub), torch.zeros(2, 3))


def test_tensor_match_complex_views() -> None:
    z = torch.randn(2, dtype=torch.complex64)
    assert passes(tensor_guard(z), z.clone())
    assert not passes(tensor_guard(z), z.conj())


def test_tensor_match_meta_device_spec() -> None:
    m = torch.empty(4, device="meta")
    assert passes(tensor_guard(m), torch.empty(4, device="meta"))
    assert not passes(tensor_guard(m), torch.empty(4))


def test_tensor_match_sparse_spec() -> None:
    s = torch.randn(2, 3).to_sparse()
    assert TensorSpec.of(s).strides is None
    assert passes(tensor_guard(s), torch.zeros(2, 3).to_sparse())
    assert not passes(tensor_guard(s), torch.zeros(2, 3))


def test_tensor_match_dynamic_dims() -> None:
    spec = TensorSpec.of(torch.randn(4, 3), dynamic_dims=[0])
    assert spec.sizes == (None, 3) and spec.strides == (None, 1)
    guard = Guard(V, GuardKind.TENSOR_MATCH, spec)
    assert passes(guard, torch.randn(4, 3))
    assert passes(guard, torch.randn(17, 3))
    assert not passes(guard, torch.randn(1, 3)), "dynamic dims are specialized on 0/1"
    assert not passes(guard, torch.randn(0, 3))
    assert not passes(guard, torch.randn(4, 2))
    assert not passes(guard, torch.randn(4, 3, 1))
    assert not passes(guard, torch.randn(3, 4).t()), "static strides still checked"
    fully = Guard(V, GuardKind.TENSOR_MATCH, TensorSpec.of(torch.randn(4), dynamic_dims=[0]))
    assert passes(fully, torch.randn(9))
    assert not passes(fully, torch.randn(9).to_sparse()), "layout checked when no stride is"


def test_tensor_spec_validation() -> None:
    with pytest.raises(TypeError, match="needs a tensor"):
        TensorSpec.of([1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Tensor class"):
        TensorSpec(int, torch.float32, torch.device("cpu"), False, (), ())
    with pytest.raises(ValueError, match="differ"):
        TensorSpec(torch.Tensor, torch.float32, torch.device("cpu"), False, (2,), ())


def test_len_match() -> None:
    assert_guard(
        GuardKind.LEN_MATCH, [1, 2, 3], same=[[4, 5, 6]], different=[[1, 2], (1, 2, 3), "abc"]
    )
    assert_guard(GuardKind.LEN_MATCH, (), same=[()], different=[(1,), []])
    assert_guard(
        GuardKind.LEN_MATCH,
        torch.nn.ModuleList([torch.nn.ReLU()]),
        same=[torch.nn.ModuleList([torch.nn.Tanh()])],
        different=[torch.nn.ModuleList(), torch.nn.Sequential(torch.nn.ReLU())],
    )


def test_dict_keys() -> None:
    assert_guard(
        GuardKind.DICT_KEYS,
        {"a": 1, "b": 2},
        same=[{"a": 3, "b": None}],
        different=[
            {"b": 2, "a": 1},  # order matters
            {"a": 1},
            {"a": 1, "b": 2, "c": 3},
            collections.OrderedDict(a=1, b=2),
            [("a", 1), ("b", 2)],
        ],
    )
    assert_guard(GuardKind.DICT_KEYS, {1: "x"}, same=[{1: "y"}], different=[{True: "x"}, {1.0: 1}])
    assert_guard(
        GuardKind.DICT_KEYS,
        collections.OrderedDict(a=1),
        same=[collections.OrderedDict(a=2)],
        different=[{"a": 1}],
    )


def test_module_training() -> None:
    module = torch.nn.Dropout()
    guard = Guard.from_value(V, GuardKind.MODULE_TRAINING, module)
    assert guard.expected is True
    assert passes(guard, module)
    module.eval()
    assert not passes(guard, module)
    module.train()
    assert passes(guard, module)
    assert not passes(guard, object())


def test_tensor_aliasing() -> None:
    x, y = torch.randn(2), torch.randn(2)
    same = Guard(V, GuardKind.TENSOR_ALIASING, LocalSource("w"))
    assert passes(same, x, w=x)
    assert not passes(same, x, w=y)
    distinct = Guard(V, GuardKind.NO_TENSOR_ALIASING, (LocalSource("w"),))
    assert passes(distinct, x, w=y)
    assert not passes(distinct, x, w=x)


def test_no_tensor_aliasing_many() -> None:
    names = [f"t{i}" for i in range(9)]
    tensors = {name: torch.randn(1) for name in names}
    guard = Guard(
        LocalSource(names[0]), GuardKind.NO_TENSOR_ALIASING, tuple(map(LocalSource, names[1:]))
    )
    compiled = compile_guards([guard], {})
    assert compiled(tensors)
    assert not compiled({**tensors, "t8": tensors["t3"]})
    assert "t8" in (compiled.failure_reason({**tensors, "t8": tensors["t3"]}) or "")


def _iteration_order(objects: list) -> tuple[int, ...]:
    first = {id(o): i for i, o in reversed(list(enumerate(objects)))}
    return tuple(first[id(o)] for o in set(objects))


def test_set_order() -> None:
    """Objects hashed by address iterate in a set as their addresses say: the guard holds
    while the same sources, added in the same order, give the same order."""
    names = ("a", "b", "c")
    sources = tuple(LocalSource(n) for n in names)
    objects = [torch.randn(1) for _ in names]
    order = _iteration_order(objects)
    guard = Guard(sources[0], GuardKind.SET_ORDER, (sources, order))
    compiled = compile_guards([guard], {})
    scope = dict(zip(names, objects, strict=True))
    assert compiled(scope) and compiled.failure_reason(scope) is None
    flipped = dict(zip(names, [objects[i] for i in (2, 1, 0)], strict=True))
    assert compiled(flipped) == (_iteration_order(list(flipped.values())) == order)
    # the same object twice makes a smaller set: never the order of three
    twice = {**scope, "c": objects[0]}
    assert not compiled(twice)
    reason = compiled.failure_reason(twice) or ""
    assert reason.startswith("a set of L['a'], L['b'], L['c'] iterates as") and "now" in reason
    with pytest.raises(TypeError, match="SET_ORDER"):
        Guard(sources[1], GuardKind.SET_ORDER, (sources, order))  # not its first source


def test_absent() -> None:
    class Obj:
        pass

    obj = Obj()
    guard = Guard(AttrSource(V, "cache"), GuardKind.ABSENT)
    assert passes(guard, obj)
    obj.cache = 1  # type: ignore[attr-defined]
    assert not passes(guard, obj)
    shadow = Guard(GlobalSource("len"), GuardKind.ABSENT)
    assert compile_guards([shadow], {})({})
    assert not compile_guards([shadow], {"len": len})({})


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (GuardKind.TYPE_MATCH, 3),
        (GuardKind.NONE_MATCH, 3),
        (GuardKind.TENSOR_MATCH, torch.randn(2)),
        (GuardKind.LEN_MATCH, 3),
        (GuardKind.LEN_MATCH, [list, 3]),
        (GuardKind.DICT_KEYS, (list, ("a",))),
        (GuardKind.DICT_KEYS, (dict, ["a"])),
        (GuardKind.MODULE_TRAINING, 1),
        (GuardKind.TENSOR_ALIASING, "L['y']"),
        (GuardKind.NO_TENSOR_ALIASING, ()),
    ],
)
def test_bad_expected_values_are_typed_errors(kind: GuardKind, expected: Any) -> None:
    with pytest.raises(TypeError, match=kind.name):
        Guard(V, kind, expected)


def test_absent_needs_a_source_that_can_be_missing() -> None:
    with pytest.raises(TypeError, match="ABSENT needs"):
        Guard(TypeSource(V), GuardKind.ABSENT)
    with pytest.raises(TypeError, match="ABSENT takes no expected value"):
        Guard(AttrSource(V, "a"), GuardKind.ABSENT, 1)


def test_sources_take_their_base_by_keyword() -> None:
    source = AttrSource(base=ItemSource(base=V, key=0), attr="weight")
    assert source.expr() == "L['v'][0].weight"
    assert TypeSource(base=V).base is V


def test_guard_needs_a_source_and_kind() -> None:
    with pytest.raises(TypeError, match="Source"):
        Guard("L['x']", GuardKind.NOT_NONE)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="GuardKind"):
        Guard(V, "type_match")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="relates sources"):
        Guard.from_value(V, GuardKind.TENSOR_ALIASING, 1)
    with pytest.raises(TypeError, match="needs a tensor"):
        Guard.from_value(V, GuardKind.TENSOR_MATCH, 1)


def test_tensor_strides_where_contiguity_is_not_enough() -> None:
    # is_contiguous() ignores the strides of size-1 dims: those specs compare stride()
    spec_t = torch.empty(2, 1, 3)
    odd = torch.empty_strided((2, 1, 3), (3, 1, 1))
    assert odd.is_contiguous() and odd.stride() != spec_t.stride()
    assert not passes(tensor_guard(spec_t), odd)
    code = compile_guards([tensor_guard(spec_t)], {}).source_code
    assert ".stride() == (3, 3, 1)" in code and "is_contiguous" not in code
    dense = compile_guards([tensor_guard(torch.empty(2, 3))], {}).source_code
    assert ".is_contiguous()" in dense and ".stride()" not in dense
    channels_last = torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last)
    assert not passes(tensor_guard(torch.empty(2, 3, 4, 5)), channels_last)
    assert passes(tensor_guard(channels_last), channels_last.clone())
    assert not passes(tensor_guard(channels_last), torch.empty(2, 3, 4, 5))
