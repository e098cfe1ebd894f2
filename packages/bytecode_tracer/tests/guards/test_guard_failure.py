"""describe() and failure_reason(): the text behind "recompiling because ..."."""

from __future__ import annotations

import torch

from ember_bytecode_tracer.guards import (
    AttrSource,
    GlobalSource,
    Guard,
    GuardKind,
    ItemSource,
    LocalSource,
    compile_guards,
)

X, Y, SELF = LocalSource("x"), LocalSource("y"), LocalSource("self")


def test_describe_texts() -> None:
    t = torch.randn(2, 3)
    assert (
        Guard.from_value(X, GuardKind.TENSOR_MATCH, t).describe()
        == "L['x'] is a tensor float32[2, 3] stride (3, 1) cpu requires_grad=False"
    )
    p = torch.nn.Parameter(torch.randn(4))
    assert (
        Guard.from_value(X, GuardKind.TENSOR_MATCH, p).describe()
        == "L['x'] is a tensor Parameter float32[4] stride (1,) cpu requires_grad=True"
    )
    assert Guard.from_value(X, GuardKind.EQUALS_MATCH, 3).describe() == "L['x'] == 3 (int)"
    assert Guard.from_value(X, GuardKind.TYPE_MATCH, 3).describe() == "L['x'] is of type int"
    assert (
        Guard.from_value(X, GuardKind.LEN_MATCH, [1]).describe() == "L['x'] is a list of length 1"
    )
    assert (
        Guard.from_value(X, GuardKind.DICT_KEYS, {"a": 1}).describe()
        == "L['x'] is a dict with keys ['a']"
    )
    assert Guard(X, GuardKind.NONE_MATCH).describe() == "L['x'] is None"
    assert Guard(X, GuardKind.TENSOR_ALIASING, Y).describe() == "L['x'] is L['y']"
    assert (
        Guard(X, GuardKind.ID_MATCH, len)
        .describe()
        .startswith("L['x'] is the object <builtin_function_or_method len at 0x")
    )
    dyn = Guard.from_value(X, GuardKind.TENSOR_MATCH, t)
    assert (
        "float32[?, 3]"
        in Guard(X, GuardKind.TENSOR_MATCH, dyn.expected.with_dynamic([0])).describe()
    )
    where = Guard.from_value(X, GuardKind.EQUALS_MATCH, 3, "f.py:9")
    assert str(where) == "L['x'] == 3 (int)  # f.py:9"


def test_failure_reason_names_the_failing_guard() -> None:
    x, y = torch.randn(2, 3), torch.randn(3)
    module = torch.nn.Linear(3, 3)
    guards = [
        Guard.from_value(X, GuardKind.TENSOR_MATCH, x, "model.py:3"),
        Guard.from_value(Y, GuardKind.TENSOR_MATCH, y, "model.py:4"),
        Guard.from_value(SELF, GuardKind.TYPE_MATCH, module),
        Guard.from_value(SELF, GuardKind.MODULE_TRAINING, module),
        Guard.from_value(LocalSource("n"), GuardKind.EQUALS_MATCH, 2),
    ]
    compiled = compile_guards(guards, {})
    good = {"x": x, "y": y, "self": module, "n": 2}
    assert compiled(good) and compiled.failure_reason(good) is None

    reason = compiled.failure_reason({**good, "y": torch.randn(5)})
    assert reason is not None
    # the first difference leads, named as the user wrote the local; the full facts follow
    assert reason.startswith("tensor 'y' size mismatch at index 0. expected 3, actual 5; ")
    assert "L['y'] is a tensor float32[3]" in reason
    assert "(read at model.py:4)" in reason
    assert reason.endswith("got size: expected (3,), got (5,)")

    reason = compiled.failure_reason({**good, "x": x.t()})
    assert reason is not None and "size: expected (2, 3), got (3, 2)" in reason
    assert reason.startswith("tensor 'x' size mismatch at index 0. expected 2, actual 3")
    reason = compiled.failure_reason({**good, "x": torch.randn(2, 4)})
    assert reason is not None
    assert reason.startswith("tensor 'x' size mismatch at index 1. expected 3, actual 4")
    reason = compiled.failure_reason({**good, "x": torch.randn(2, 3, 1)})
    assert reason is not None and reason.endswith("got (2, 3, 1)")
    assert reason.startswith("tensor 'x' rank mismatch. expected 2, actual 3; ")

    reason = compiled.failure_reason({**good, "x": torch.randn(3, 2).t()})
    assert reason is not None and "stride: expected (3, 1), got (1, 2)" in reason
    assert reason.startswith("tensor 'x' stride mismatch at index 0. expected 3, actual 1")

    reason = compiled.failure_reason({**good, "x": x.to(torch.float16)})
    assert reason is not None and "dtype: expected float32, got float16" in reason
    assert reason.startswith("tensor 'x' dtype mismatch. expected float32, actual float16")

    reason = compiled.failure_reason({**good, "x": x.to("meta")})
    assert reason is not None and "device: expected cpu, got meta" in reason
    assert reason.startswith("tensor 'x' device mismatch. expected cpu, actual meta")

    reason = compiled.failure_reason({**good, "x": x.requires_grad_(True)})
    assert reason is not None and "requires_grad: expected False, got True" in reason
    assert reason.startswith("tensor 'x' requires_grad mismatch. expected False, actual True")
    x.requires_grad_(False)

    reason = compiled.failure_reason({**good, "x": torch.nn.Parameter(x.clone())})
    assert reason is not None
    assert reason.startswith("tensor 'x' type mismatch. expected Tensor, actual Parameter")

    reason = compiled.failure_reason({**good, "n": True})
    assert reason == "L['n'] == 2 (int); got True (bool)"

    module.eval()
    reason = compiled.failure_reason(good)
    assert reason == "L['self'].training is True; got training is False"
    module.train()

    reason = compiled.failure_reason({**good, "self": torch.nn.ReLU()})
    assert reason is not None and reason.startswith("L['self'] is of type Linear")


def test_failure_reason_for_unreadable_sources() -> None:
    guard = Guard(ItemSource(AttrSource(X, "layers"), 3), GuardKind.NOT_NONE)
    compiled = compile_guards([guard], {})
    reason = compiled.failure_reason({"x": object()})
    assert reason is not None
    assert "got L['x'].layers cannot be read (AttributeError:" in reason
    assert "L['x'] cannot be read (KeyError: 'x')" in (compiled.failure_reason({}) or "")


def test_failure_reason_other_kinds() -> None:
    x = torch.randn(1)
    alias = compile_guards([Guard(X, GuardKind.NO_TENSOR_ALIASING, (Y,))], {})
    assert alias.failure_reason({"x": x, "y": x}) == (
        "L['x'], L['y'] are distinct objects; got L['x'] is L['y']"
    )
    keys = compile_guards([Guard.from_value(X, GuardKind.DICT_KEYS, {"a": 1, "b": 2})], {})
    assert keys.failure_reason({"x": {"b": 1, "a": 2}}) == (
        "L['x'] is a dict with keys ['a', 'b']; got keys ['b', 'a']"
    )
    length = compile_guards([Guard.from_value(X, GuardKind.LEN_MATCH, [1])], {})
    assert length.failure_reason({"x": [1, 2]}) == "L['x'] is a list of length 1; got length 2"
    ident = compile_guards(
        [Guard.from_value(GlobalSource("f"), GuardKind.ID_MATCH, len)], {"f": abs}
    )
    assert "got the object" in (ident.failure_reason({}) or "") and "abs" in (
        ident.failure_reason({}) or ""
    )
    absent = compile_guards([Guard(AttrSource(X, "real"), GuardKind.ABSENT)], {})
    assert absent.failure_reason({"x": 1}) == "L['x'].real does not exist; got it exists: 1 (int)"


def test_a_size_mismatch_names_the_first_differing_dim():
    from ember_bytecode_tracer.guards.tensor_spec import TensorSpec

    spec = TensorSpec.of(torch.randn(4, 128, 8), dynamic_dims=[0])
    assert spec.mismatch(torch.randn(9, 128, 8)) is None  # dim 0 is dynamic
    assert spec.first_mismatch(torch.randn(9, 128, 8)) is None
    assert spec.mismatch(torch.randn(4, 127, 8)) == "size: expected (?, 128, 8), got (4, 127, 8)"
    assert spec.first_mismatch(torch.randn(4, 127, 8)) == (
        "size mismatch at index 1. expected 128, actual 127"
    )
    # a dynamic dim of size 1 is specialized away from the dynamic entry
    assert spec.first_mismatch(torch.randn(1, 128, 8)) == (
        "size mismatch at index 0. expected a size >= 2, actual 1"
    )
    # a dynamic dim's stride is not checked; a static one's is
    assert spec.first_mismatch(torch.randn(4, 8, 128).transpose(1, 2)) == (
        "stride mismatch at index 1. expected 8, actual 1"
    )


def test_a_tensor_reason_names_the_tensor_as_the_user_wrote_it() -> None:
    seen, changed = torch.randn(2), torch.randn(3)
    module = torch.nn.Module()
    module.w = changed
    cases = [  # (source, the frame's locals, its globals, the name the reason gives)
        (ItemSource(X, "a"), {"x": {"a": changed}}, {}, "x['a']"),
        (AttrSource(SELF, "w"), {"self": module}, {}, "self.w"),
        (GlobalSource("w"), {}, {"w": changed}, "G['w']"),
        (LocalSource("___stack0", shown_as="<stack 0>"), {"___stack0": changed}, {}, "<stack 0>"),
    ]
    for source, f_locals, f_globals, name in cases:
        guard = Guard.from_value(source, GuardKind.TENSOR_MATCH, seen)
        reason = compile_guards([guard], f_globals).failure_reason(f_locals)
        assert reason is not None
        assert reason.startswith(f"tensor '{name}' size mismatch at index 0. expected 2, actual 3")
