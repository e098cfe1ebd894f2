"""compile_guards: dedup, ordering, shared reads, never raising, globals, generated code."""

from __future__ import annotations

import builtins
import re
from typing import Any

import torch

from ember_bytecode_tracer.guards import (
    AttrSource,
    BuiltinSource,
    CompiledGuard,
    GlobalSource,
    Guard,
    GuardKind,
    ItemSource,
    LocalSource,
    TorchStateSource,
    compile_guards,
)

X, Y, SELF = LocalSource("x"), LocalSource("y"), LocalSource("self")


def code_lines(compiled: CompiledGuard) -> list[str]:
    """The generated statements, without comments."""
    return [
        line.strip()
        for line in compiled.source_code.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def test_deduplicates_equal_guards() -> None:
    t = torch.randn(2)
    guards = [
        Guard.from_value(X, GuardKind.TENSOR_MATCH, t, "a.py:1"),
        Guard.from_value(X, GuardKind.TENSOR_MATCH, t, "a.py:2"),
        Guard.from_value(LocalSource("x"), GuardKind.TENSOR_MATCH, t.clone()),
        Guard.from_value(Y, GuardKind.EQUALS_MATCH, 1),
        Guard.from_value(Y, GuardKind.EQUALS_MATCH, 1),
    ]
    compiled = compile_guards(guards, {})
    assert len(compiled.guards) == 2
    assert compiled.guards[-1].user_location == "a.py:1", "the first occurrence is kept"


def test_dedup_is_type_strict_and_identity_based() -> None:
    assert Guard(X, GuardKind.EQUALS_MATCH, 1) != Guard(X, GuardKind.EQUALS_MATCH, True)
    assert Guard(X, GuardKind.EQUALS_MATCH, 1) != Guard(X, GuardKind.EQUALS_MATCH, 1.0)
    assert Guard(X, GuardKind.EQUALS_MATCH, 0.0) != Guard(X, GuardKind.EQUALS_MATCH, -0.0)
    nan = Guard(X, GuardKind.EQUALS_MATCH, float("nan"))
    assert nan == Guard(X, GuardKind.EQUALS_MATCH, float("nan"))
    a, b = [1], [1]
    assert Guard(X, GuardKind.ID_MATCH, a) == Guard(X, GuardKind.ID_MATCH, a)
    assert Guard(X, GuardKind.ID_MATCH, a) != Guard(X, GuardKind.ID_MATCH, b)
    assert len({Guard(X, GuardKind.ID_MATCH, a), Guard(X, GuardKind.ID_MATCH, a)}) == 1


def test_implied_checks_are_dropped() -> None:
    t = torch.randn(2)
    guards = [
        Guard.from_value(X, GuardKind.TYPE_MATCH, t),
        Guard(X, GuardKind.NOT_NONE),
        Guard.from_value(X, GuardKind.TENSOR_MATCH, t),
        Guard.from_value(Y, GuardKind.TYPE_MATCH, [1]),
        Guard.from_value(Y, GuardKind.LEN_MATCH, [1]),
        Guard(SELF, GuardKind.NOT_NONE),
        Guard(SELF, GuardKind.ID_MATCH, len),
    ]
    kinds = [(g.source, g.kind) for g in compile_guards(guards, {}).guards]
    assert kinds == [
        (SELF, GuardKind.ID_MATCH),
        (Y, GuardKind.LEN_MATCH),
        (X, GuardKind.TENSOR_MATCH),
    ]


def test_cheap_checks_run_first() -> None:
    t = torch.randn(2)
    guards = [
        Guard.from_value(X, GuardKind.TENSOR_MATCH, t),
        Guard.from_value(Y, GuardKind.DICT_KEYS, {"a": 1}),
        Guard.from_value(LocalSource("n"), GuardKind.LEN_MATCH, [1]),
        Guard.from_value(AttrSource(SELF, "mode"), GuardKind.EQUALS_MATCH, "fast"),
        Guard.from_value(SELF, GuardKind.TYPE_MATCH, object()),
    ]
    order = [g.kind for g in compile_guards(guards, {}).guards]
    assert order == [
        GuardKind.TYPE_MATCH,  # shallow before deep within a cost class
        GuardKind.EQUALS_MATCH,
        GuardKind.LEN_MATCH,
        GuardKind.DICT_KEYS,
        GuardKind.TENSOR_MATCH,
    ]


def test_empty_guard_set_always_passes() -> None:
    compiled = compile_guards([], {})
    assert compiled({}) and compiled({"x": 1})
    assert compiled.failure_reason({}) is None


class Counting:
    """An object whose `layers` attribute counts its reads."""

    reads = 0

    def __init__(self) -> None:
        self._layers = [torch.randn(2), torch.randn(3)]

    @property
    def layers(self) -> list[torch.Tensor]:
        Counting.reads += 1
        return self._layers


def test_shared_subexpressions_are_read_once() -> None:
    obj = Counting()
    layers = AttrSource(SELF, "layers")
    guards = [
        Guard.from_value(SELF, GuardKind.TYPE_MATCH, obj),
        Guard.from_value(layers, GuardKind.LEN_MATCH, obj.layers),
        Guard.from_value(ItemSource(layers, 0), GuardKind.TENSOR_MATCH, obj.layers[0]),
        Guard.from_value(ItemSource(layers, 1), GuardKind.TENSOR_MATCH, obj.layers[1]),
    ]
    compiled = compile_guards(guards, {})
    for check in (compiled.check, compiled.native):  # the native guard reads it once too
        Counting.reads = 0
        assert check({"self": obj})
        assert Counting.reads == 1
    assert sum("L['self']" in line for line in code_lines(compiled)) == 1


def test_single_use_values_are_not_bound() -> None:
    compiled = compile_guards([Guard(X, GuardKind.NONE_MATCH)], {})
    assert "if not (L['x'] is None):" in code_lines(compiled)


class Flaky:
    @property
    def value(self) -> int:
        raise ValueError("broken property")


def test_unreachable_sources_make_the_guard_false() -> None:
    holder: dict[str, Any] = {"items": [1, 2, 3], "obj": Counting()}
    items = ItemSource(LocalSource("d"), "items")
    guards = [
        Guard.from_value(ItemSource(items, 2), GuardKind.EQUALS_MATCH, 3),
        Guard.from_value(
            AttrSource(ItemSource(LocalSource("d"), "obj"), "_layers"), GuardKind.LEN_MATCH, [1, 2]
        ),
    ]
    compiled = compile_guards(guards, {})
    assert compiled({"d": holder})
    assert not compiled({"d": {**holder, "items": [1, 2]}}), "list got shorter"
    assert not compiled({"d": {"obj": holder["obj"]}}), "key disappeared"
    assert not compiled({"d": {**holder, "obj": object()}}), "attribute missing"
    assert not compiled({"d": None}), "not subscriptable"
    assert not compiled({}), "local missing"
    flaky = compile_guards([Guard(AttrSource(X, "value"), GuardKind.EQUALS_MATCH, 1)], {})
    assert not flaky({"x": Flaky()}), "a property that raises"
    assert "ValueError: broken property" in (flaky.failure_reason({"x": Flaky()}) or "")


def test_globals_are_read_through_the_given_dict() -> None:
    f_globals: dict[str, Any] = {"torch": torch, "scale": 2}
    guards = [
        Guard.from_value(GlobalSource("torch"), GuardKind.ID_MATCH, torch),
        Guard.from_value(GlobalSource("scale"), GuardKind.EQUALS_MATCH, 2),
        Guard.from_value(AttrSource(GlobalSource("torch"), "nn"), GuardKind.ID_MATCH, torch.nn),
    ]
    compiled = compile_guards(guards, f_globals)
    assert compiled({})
    f_globals["scale"] = 3  # the guard sees the dict as it is at call time
    assert not compiled({})
    assert "G['scale'] == 2" in (compiled.failure_reason({}) or "")
    f_globals["scale"] = 2
    assert compiled({"scale": 3, "G": {}}), "locals never stand in for globals"
    del f_globals["torch"]
    assert not compiled({})


def test_builtins_and_shadowing() -> None:
    guards = [
        Guard(GlobalSource("len"), GuardKind.ABSENT),
        Guard.from_value(BuiltinSource("len"), GuardKind.ID_MATCH, len),
    ]
    f_globals: dict[str, Any] = {"__builtins__": builtins}
    compiled = compile_guards(guards, f_globals)
    assert compiled({})
    f_globals["len"] = lambda x: 0
    assert not compiled({})
    del f_globals["len"]
    fake_builtins = {"len": lambda x: 0}
    assert not compile_guards(guards, {"__builtins__": fake_builtins})({})
    assert not compile_guards(guards, {}, f_builtins=fake_builtins)({})


def test_torch_state() -> None:
    guard = Guard.from_value(TorchStateSource("grad_enabled"), GuardKind.EQUALS_MATCH, True)
    compiled = compile_guards([guard], {})
    assert compiled({})
    with torch.no_grad():
        assert not compiled({})
        assert "torch.is_grad_enabled() == True" in (compiled.failure_reason({}) or "")
    dtype = Guard.from_value(
        TorchStateSource("default_dtype"), GuardKind.EQUALS_MATCH, torch.get_default_dtype()
    )
    assert compile_guards([dtype], {})({})


def test_source_code_is_printable_and_names_every_source() -> None:
    obj = Counting()
    layers = AttrSource(SELF, "layers")
    guards = [
        Guard.from_value(SELF, GuardKind.TYPE_MATCH, obj, "model.py:7"),
        Guard.from_value(ItemSource(layers, 0), GuardKind.TENSOR_MATCH, obj.layers[0]),
        Guard.from_value(GlobalSource("torch"), GuardKind.ID_MATCH, torch),
        Guard.from_value(AttrSource(GlobalSource("torch"), "nn"), GuardKind.ID_MATCH, torch.nn),
        Guard(AttrSource(SELF, "not an identifier"), GuardKind.ABSENT),
    ]
    compiled = compile_guards(guards, {"torch": torch})
    text = compiled.source_code
    assert all(line.isprintable() for line in text.splitlines())
    for guard in guards:
        assert guard.source.expr() in text, guard.source
    assert "model.py:7" in text
    compile(text, "<check>", "exec")  # the shown code is the code that runs
    assert compiled({"self": obj})


def test_call_and_check_agree() -> None:
    compiled = compile_guards([Guard.from_value(X, GuardKind.EQUALS_MATCH, 3)], {})
    for value in (3, 4, True):
        assert compiled({"x": value}) is compiled.check({"x": value})
    assert type(compiled.check).__name__ == "function"
    assert "3 guards" not in repr(compiled) and "1 guards" in repr(compiled)


def test_compile_guards_validates_globals() -> None:
    try:
        compile_guards([], None)  # type: ignore[arg-type]
    except TypeError as e:
        assert "globals dict" in str(e)
    else:
        raise AssertionError("expected a TypeError")


def test_generated_names_are_valid_for_odd_sources() -> None:
    odd = [
        AttrSource(LocalSource("0weird"), "class"),
        ItemSource(LocalSource("d"), ("a b", 1)),
        ItemSource(LocalSource("d"), -1),
    ]
    values = {"0weird": type("K", (), {"class": 5})(), "d": {("a b", 1): 5, -1: 5}}
    guards = [Guard.from_value(s, GuardKind.EQUALS_MATCH, 5) for s in odd]
    guards += [Guard.from_value(s, GuardKind.TYPE_MATCH, 5) for s in odd]
    compiled = compile_guards(guards, {})
    assert compiled(values)
    assert all(re.match(r"^[\w\[\]'(), .=:#-]*$", line) for line in code_lines(compiled))


class BadRepr:
    __name__ = "line\nbreak\rhere"

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_hostile_objects_do_not_break_compilation() -> None:
    obj = BadRepr()
    guards = [
        Guard.from_value(X, GuardKind.ID_MATCH, obj),
        Guard.from_value(Y, GuardKind.EQUALS_MATCH, "a\nb\rc"),
        Guard.from_value(SELF, GuardKind.ID_MATCH, [obj]),
    ]
    compiled = compile_guards(guards, {})
    assert compiled({"x": obj, "y": "a\nb\rc", "self": guards[2].expected})
    assert all(line.isprintable() for line in compiled.source_code.splitlines())
    reason = compiled.failure_reason({"x": BadRepr(), "y": "", "self": None})
    assert reason is not None and reason.startswith("L['x'] is the object")


class Explosive:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("boom")

    __hash__ = object.__hash__


def test_values_whose_methods_raise_are_misses() -> None:
    compiled = compile_guards([Guard.from_value(X, GuardKind.EQUALS_MATCH, (1, 2))], {})
    assert not compiled({"x": (Explosive(), 2)})
    keys = compile_guards([Guard.from_value(X, GuardKind.DICT_KEYS, {"a": 1})], {})
    assert not keys({"x": {Explosive(): 1}})


def test_benchmark_guard_sets_compile_and_pass() -> None:
    """Keeps bench_guards.py honest (it is run by hand, never timed in tests)."""
    import bench_guards
    import torch.nn.functional as F

    model = bench_guards.MLP()
    f_locals = {"self": model}
    compiled = compile_guards(
        bench_guards.module_guards(model), {"torch": torch, "F": F}, f_locals=f_locals
    )
    assert compiled(f_locals) and "_parameters['weight']" in compiled.source_code
    tensors = [torch.randn(2), torch.randn(3), torch.randn(4)]
    three = compile_guards(bench_guards.three_tensor_guards(*tensors), {})
    assert three(dict(zip("xyz", tensors, strict=True)))
