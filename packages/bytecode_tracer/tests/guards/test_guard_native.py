"""Native guards (GuardProgram) answer exactly as the Python guard over many inputs.

The scene below holds a value for every source kind (locals, globals, builtins, attributes,
items, dict keys/values by position, types, torch state) and every guard kind; each
mutation rebinds or changes one of them, and random mixes of mutations follow. Whatever
the inputs, `native(L) == check(L)`.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
import torch

import ember_frame_hook as fh
from ember_bytecode_tracer.guards import (
    AttrSource,
    BuiltinSource,
    DictKeysSource,
    DictValuesSource,
    GenericAttrSource,
    GlobalSource,
    Guard,
    GuardKind,
    ItemSource,
    LocalSource,
    Source,
    TorchStateSource,
    TypeSource,
    compile_guards,
    native,
    native_tensor,
)
from ember_bytecode_tracer.guards.native import GuardMismatch, describe_program

K = GuardKind


@pytest.fixture(autouse=True)
def native_mode_on() -> Any:
    """These tests pick modes themselves, whatever EMBER_NATIVE_GUARDS says."""
    old = native.set_native_mode("1")
    yield
    native.set_native_mode(old)


@pytest.fixture(autouse=True, params=["attribute reads", "C++ tensor check"])
def tensor_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with tensor matches as attribute reads and, where built, as the
    C++ check (native_tensor.py)."""
    if request.param == "attribute reads":
        monkeypatch.setattr(native_tensor, "capsule", lambda: None)
    elif native_tensor.capsule() is None:
        pytest.skip("the C++ tensor check is not built")
    return request.param


class Holder:
    pass


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.layers = torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Linear(2, 2)])


def hooked_class() -> type:
    """A class with a Python __getattribute__ that hides `real` (a new class per scene:
    mutations change it)."""

    class Hooked:
        table: ClassVar[dict] = {"alias": "real"}

        def __init__(self) -> None:
            self.real = 2

        def __getattribute__(self, key: str) -> Any:
            if key == "real":
                raise AttributeError(key)
            return super().__getattribute__(key)

    return Hooked


def scene() -> tuple[dict[str, Any], dict[str, Any]]:
    """Fresh (f_locals, f_globals) with one value of each interesting sort."""
    obj = Holder()
    obj.items = [torch.randn(2, 3), torch.randn(4)]
    obj.cfg = {"a": 1, "b": (1, 2.5), "c": None}
    obj.by_dtype = {torch.float32: 1, torch.int64: 2}
    obj.flag = True
    obj.ratio = 0.0  # strict equality (-0.0 differs)
    obj.nan = float("nan")
    obj.cplx = 1 + 2j  # strict equality through Python (CHECK_CALL)
    obj.size = torch.Size([2, 3])
    obj.dev = torch.device("cpu")
    x = torch.randn(4, 5)
    f_locals = {
        "x": x,
        "y": torch.randn(5, 4).t(),  # non-contiguous: strides are compared
        "z": torch.randn(3, 1, dtype=torch.complex64),
        "w": torch.randn(6, 7).requires_grad_(),
        "v": x,  # aliases x
        "obj": obj,
        "mod": Block(),
        "n": 7,
        "s": "abc",
        "t": (1, True, "x"),
        "none": None,
        "hk": hooked_class()(),
    }
    f_globals = {"G_INT": 3, "G_FN": len, "__builtins__": {"len": len, "B_VAL": 11}}
    return f_locals, f_globals


def guards_for(f_locals: dict[str, Any], f_globals: dict[str, Any]) -> list[Guard]:
    L = LocalSource
    obj, mod = L("obj"), L("mod")

    def g(source: Source, kind: GuardKind, **kw: Any) -> Guard:
        if "expected" in kw:
            return Guard(source, kind, kw["expected"])
        return Guard.from_value(source, kind, source.get(f_locals, f_globals))

    by_dtype = AttrSource(obj, "by_dtype")
    hk, hk_type = L("hk"), TypeSource(L("hk"))
    hk_dict = GenericAttrSource(hk, "__dict__")  # read past the hook
    return [
        g(ItemSource(hk_dict, "real"), K.EQUALS_MATCH),
        g(GenericAttrSource(hk, "table"), K.DICT_KEYS),
        Guard(ItemSource(hk_dict, "gone"), K.ABSENT),
        Guard(AttrSource(hk_type, "gone"), K.ABSENT),  # a class: from the type lookup
        Guard(AttrSource(hk_type, "__getattr__"), K.ABSENT),
        *(g(L(n), K.TENSOR_MATCH) for n in ("x", "y", "z", "w")),
        Guard(L("v"), K.TENSOR_ALIASING, L("x")),
        Guard(L("x"), K.NO_TENSOR_ALIASING, (L("y"), L("z"), L("w"))),
        g(obj, K.TYPE_MATCH),
        g(TypeSource(obj), K.ID_MATCH),
        g(AttrSource(obj, "items"), K.LEN_MATCH),
        g(ItemSource(AttrSource(obj, "items"), 0), K.TENSOR_MATCH),
        g(ItemSource(AttrSource(obj, "items"), -1), K.TENSOR_MATCH),
        g(AttrSource(obj, "cfg"), K.DICT_KEYS),
        g(ItemSource(AttrSource(obj, "cfg"), "a"), K.EQUALS_MATCH),
        g(ItemSource(AttrSource(obj, "cfg"), "b"), K.EQUALS_MATCH),
        g(ItemSource(AttrSource(obj, "cfg"), "c"), K.NONE_MATCH),
        g(by_dtype, K.LEN_MATCH),
        g(ItemSource(DictKeysSource(by_dtype), 0), K.ID_MATCH),
        g(ItemSource(DictValuesSource(by_dtype), 1), K.EQUALS_MATCH),
        g(AttrSource(obj, "flag"), K.EQUALS_MATCH),
        g(AttrSource(obj, "ratio"), K.EQUALS_MATCH),
        g(AttrSource(obj, "nan"), K.EQUALS_MATCH),
        g(AttrSource(obj, "cplx"), K.EQUALS_MATCH),
        g(AttrSource(obj, "size"), K.EQUALS_MATCH),
        g(AttrSource(obj, "dev"), K.EQUALS_MATCH),
        Guard(AttrSource(obj, "missing"), K.ABSENT),
        Guard(ItemSource(AttrSource(obj, "cfg"), "zz"), K.ABSENT),
        Guard(LocalSource("absent_local"), K.ABSENT),
        Guard(AttrSource(mod, "extra"), K.ABSENT),  # read from the module's four dicts
        Guard(GlobalSource("B_VAL"), K.ABSENT),
        g(mod, K.TYPE_MATCH),
        g(mod, K.MODULE_TRAINING),
        g(AttrSource(mod, "lin"), K.TYPE_MATCH),
        g(AttrSource(AttrSource(mod, "lin"), "weight"), K.TENSOR_MATCH),
        g(ItemSource(AttrSource(mod, "layers"), 1), K.MODULE_TRAINING),
        g(AttrSource(mod, "layers"), K.TYPE_MATCH),
        g(L("n"), K.EQUALS_MATCH),
        g(L("s"), K.EQUALS_MATCH),
        g(L("t"), K.EQUALS_MATCH),
        g(L("none"), K.NONE_MATCH),
        Guard(L("x"), K.NOT_NONE),
        g(GlobalSource("G_INT"), K.EQUALS_MATCH),
        g(GlobalSource("G_FN"), K.ID_MATCH),
        g(BuiltinSource("B_VAL"), K.EQUALS_MATCH),
        Guard(TorchStateSource("grad_enabled"), K.EQUALS_MATCH, torch.is_grad_enabled()),
        Guard(TorchStateSource("default_dtype"), K.EQUALS_MATCH, torch.get_default_dtype()),
    ]


def _set(obj: Any, name: str, value: Any) -> None:
    setattr(obj, name, value)


MUTATIONS = {
    "x dtype": lambda L, G: L.update(x=L["x"].double(), v=None) or L.update(v=L["x"]),
    "x shape": lambda L, G: L.update(x=torch.randn(4, 6)),
    "x requires_grad": lambda L, G: L["x"].requires_grad_(),
    "x subclass": lambda L, G: L.update(x=torch.nn.Parameter(L["x"]), v=None),
    "x not a tensor": lambda L, G: L.update(x=3),
    "x missing": lambda L, G: L.pop("x"),
    "y contiguous": lambda L, G: L.update(y=L["y"].contiguous()),
    "z conj": lambda L, G: L.update(z=L["z"].conj()),
    "w no grad": lambda L, G: L.update(w=L["w"].detach()),
    "v unaliased": lambda L, G: L.update(v=L["x"].clone()),
    "y aliases x": lambda L, G: L.update(y=L["x"]),
    "obj class": lambda L, G: _set(L["obj"], "__class__", type("Other", (Holder,), {})),
    "obj replaced": lambda L, G: L.update(obj=Holder()),
    "items shorter": lambda L, G: L["obj"].items.pop(),
    "items reordered": lambda L, G: L["obj"].items.reverse(),
    "items a tuple": lambda L, G: _set(L["obj"], "items", tuple(L["obj"].items)),
    "cfg key order": lambda L, G: _set(L["obj"], "cfg", dict(reversed(L["obj"].cfg.items()))),
    "cfg value": lambda L, G: L["obj"].cfg.update(a=True),
    "cfg tuple item type": lambda L, G: L["obj"].cfg.update(b=(True, 2.5)),
    "cfg extra key": lambda L, G: L["obj"].cfg.update(zz=1),
    "cfg not a dict": lambda L, G: _set(L["obj"], "cfg", list(L["obj"].cfg)),
    "dtype keys swapped": lambda L, G: _set(
        L["obj"], "by_dtype", {torch.int64: 2, torch.float32: 1}
    ),
    "dtype value": lambda L, G: L["obj"].by_dtype.update({torch.int64: 2.0}),
    "flag": lambda L, G: _set(L["obj"], "flag", 1),
    "ratio -0.0": lambda L, G: _set(L["obj"], "ratio", -0.0),
    "nan stays nan": lambda L, G: _set(L["obj"], "nan", float("nan")),
    "nan a number": lambda L, G: _set(L["obj"], "nan", 1.0),
    "ratio an int": lambda L, G: _set(L["obj"], "ratio", 0),
    "cplx": lambda L, G: _set(L["obj"], "cplx", 1 + 3j),
    "size tuple": lambda L, G: _set(L["obj"], "size", (2, 3)),
    "dev meta": lambda L, G: _set(L["obj"], "dev", torch.device("meta")),
    "attr appears": lambda L, G: _set(L["obj"], "missing", 1),
    "local appears": lambda L, G: L.update(absent_local=1),
    "global shadows builtin": lambda L, G: G.update(B_VAL=11),
    "builtin changes": lambda L, G: G["__builtins__"].update(B_VAL=12),
    "global changes": lambda L, G: G.update(G_INT=4),
    "global removed": lambda L, G: G.pop("G_FN"),
    "module eval": lambda L, G: L["mod"].eval(),
    "submodule eval": lambda L, G: L["mod"].layers[1].eval(),
    "submodule replaced": lambda L, G: _set(L["mod"], "lin", torch.nn.Linear(3, 4)),
    "weight moved to __dict__": lambda L, G: L["mod"].__dict__.update(
        lin=L["mod"]._modules.pop("lin")
    ),
    "layers shorter": lambda L, G: L["mod"].layers.__delitem__(1),
    "module attr appears": lambda L, G: _set(L["mod"], "extra", 1),
    "module buffer appears": lambda L, G: L["mod"].register_buffer("extra", torch.ones(1)),
    "module child appears": lambda L, G: L["mod"].add_module("extra", torch.nn.ReLU()),
    "module parameter appears": lambda L, G: L["mod"].register_parameter(
        "extra", torch.nn.Parameter(torch.ones(1))
    ),
    "n bool": lambda L, G: L.update(n=True),
    "s other": lambda L, G: L.update(s="abd"),
    "t item types": lambda L, G: L.update(t=(1, 1, "x")),
    "none set": lambda L, G: L.update(none=0),
    "hooked entry": lambda L, G: object.__setattr__(L["hk"], "real", 3),
    "hooked entry appears": lambda L, G: _set(L["hk"], "gone", 1),
    "hooked class attr appears": lambda L, G: _set(type(L["hk"]), "gone", 1),
    "hooked base attr appears": lambda L, G: L.update(
        hk=type("Sub", (type(L["hk"]),), {"gone": 1})()
    ),
    "hooked __getattr__ appears": lambda L, G: _set(type(L["hk"]), "__getattr__", _set),
    "hooked table key": lambda L, G: type(L["hk"]).table.update(other="real"),
    "nothing": lambda L, G: None,
}


def agree(compiled: Any, f_locals: dict[str, Any]) -> bool:
    expected = compiled.check(f_locals)
    assert compiled.native(f_locals) is bool(expected), compiled.source_code
    return expected


def build(f_locals: dict[str, Any], f_globals: dict[str, Any]) -> Any:
    compiled = compile_guards(guards_for(f_locals, f_globals), f_globals, f_locals=f_locals)
    assert compiled.untranslated == ()
    return compiled


def test_the_scene_passes_natively(tensor_path: str) -> None:
    f_locals, f_globals = scene()
    compiled = build(f_locals, f_globals)
    assert agree(compiled, f_locals)
    kinds = {op for op, *_ in compiled.native.instructions}
    assert {"CHECK_KEYS", "CHECK_DISTINCT", "CHECK_SAME", "LOAD_VALUES", "CHECK_FLOAT"} <= kinds
    assert "CHECK_CALL" in kinds  # the complex constant
    assert "LOAD_GENERIC_ATTR" in kinds  # past the Python __getattribute__
    names = [arg for op, _, _, arg in compiled.native.instructions if op == "CHECK_NOT_IN"]
    assert names.count("extra") == 4  # hasattr's four places, without nn.Module.__getattr__
    assert "'extra' not in" in compiled.source_code
    tensor_op = "CHECK_DIMS" if tensor_path == "attribute reads" else "CHECK_NATIVE"
    assert tensor_op in kinds


@pytest.mark.parametrize("name", sorted(MUTATIONS))
@pytest.mark.parametrize("warm", [False, True], ids=["first call", "blocks recorded"])
def test_each_mutation(name: str, warm: bool) -> None:
    f_locals, f_globals = scene()
    compiled = build(f_locals, f_globals)
    if warm:  # the program's blocks recorded, then skipped while their stamps hold
        assert agree(compiled, f_locals) and agree(compiled, f_locals)
        assert any(state == "recorded" for state, *_ in compiled.native.blocks)
    MUTATIONS[name](f_locals, f_globals)
    result = agree(compiled, f_locals)
    if name == "nothing" or name == "nan stays nan":
        assert result
    elif name not in ("weight moved to __dict__",):
        assert not result, name


def test_grad_mode_and_default_dtype() -> None:
    f_locals, f_globals = scene()
    compiled = build(f_locals, f_globals)
    with torch.no_grad():
        assert not agree(compiled, f_locals)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert not agree(compiled, f_locals)
    finally:
        torch.set_default_dtype(previous)


def test_random_mixes_of_mutations() -> None:
    rng = random.Random(0)
    names = sorted(MUTATIONS)
    results = set()
    for _ in range(150):
        f_locals, f_globals = scene()
        compiled = build(f_locals, f_globals)
        for name in rng.sample(names, rng.randint(0, 3)):
            # an earlier mutation may have removed what this one changes
            with contextlib.suppress(KeyError, IndexError, AttributeError):
                MUTATIONS[name](f_locals, f_globals)
        results.add(agree(compiled, f_locals))
    assert results == {True, False}


def test_hostile_values_fail_alike() -> None:
    class Raising:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(name)

        def __eq__(self, other: object) -> bool:
            raise ValueError("no")

        __hash__ = object.__hash__

    f_locals, f_globals = scene()
    compiled = build(f_locals, f_globals)
    for name in ("obj", "mod", "n", "s", "t", "x"):
        changed = dict(f_locals, **{name: Raising()})
        assert not agree(compiled, changed)


@dataclass(frozen=True)
class LenSource(Source):
    """A source kind the native assembler has no load for (it runs as Python)."""

    base: Source

    def access(self, base_expr: str) -> str:
        return f"len({base_expr})"

    def step(self, base_value: Any, scope: Any) -> Any:
        return len(base_value)


def test_untranslated_guards_run_as_python_inside_the_program() -> None:
    guards = [
        Guard(LocalSource("x"), K.TYPE_MATCH, list),
        Guard(LenSource(LocalSource("x")), K.EQUALS_MATCH, 2),
    ]
    compiled = compile_guards(guards, {})
    assert [g.source for g in compiled.untranslated] == [LenSource(LocalSource("x"))]
    assert "1 guards run as Python" in compiled.source_code
    assert agree(compiled, {"x": [1, 2]})
    assert not agree(compiled, {"x": [1]})
    assert not agree(compiled, {"x": (1, 2)})


def test_modes_and_verify() -> None:
    f_locals, f_globals = scene()
    compiled = build(f_locals, f_globals)
    native.set_native_mode("0")
    try:
        assert compiled.native_for(object()) is None
        native.set_native_mode("verify")
        checker = compiled.native_for(None)
        assert checker(f_locals) is True
        compiled.check = lambda L: False  # a Python guard that disagrees
        with pytest.raises(GuardMismatch):
            compiled.native_for(None)(f_locals)
        with pytest.raises(ValueError):
            native.set_native_mode("fast")
    finally:
        native.set_native_mode("1")
    assert isinstance(compiled.native_for(None), fh.GuardProgram)


def test_owner_and_extra_checks() -> None:
    f_locals, f_globals = scene()
    compiled = build(f_locals, f_globals)
    owner = object()
    seen = []
    program = compiled.native_for(owner, extra=lambda L: seen.append(L) or True)
    assert not program(f_locals)  # the hook is off: not this owner's
    previous = fh.set_eval_frame(False)  # run-only: every entry may run
    try:
        assert program(f_locals)
    finally:
        fh.set_eval_frame(previous)
    assert seen == [f_locals]

    def raising(f_locals: dict[str, Any]) -> bool:
        raise ZeroDivisionError  # a shape guard that raises: raised, as from the Python form

    with pytest.raises(ZeroDivisionError):
        compiled.native_for(None, extra=raising)(f_locals)


def test_program_is_readable() -> None:
    f_locals, f_globals = scene()
    text = describe_program(build(f_locals, f_globals).native)
    assert "CHECK_TYPE r" in text and "LOAD_ITEM r0 'x'" in text


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


def test_the_frame_hook_runs_the_program() -> None:
    made = []

    def callback(frame: Any, cache: Any) -> Any:
        if frame.f_code is not add.__code__:
            return None
        guards = [
            Guard.from_value(LocalSource(n), K.TENSOR_MATCH, v) for n, v in frame.f_locals.items()
        ]
        compiled = compile_guards(guards, frame.f_globals, f_locals=frame.f_locals)
        made.append(compiled)
        return fh.GuardedCode(frame.f_code, compiled.native_for(callback))

    a, b = torch.randn(2), torch.randn(2)
    previous = fh.set_eval_frame(callback)
    try:
        add(a, b)
        add(b, a)  # a hit
        add(a.double(), b.double())  # a miss
    finally:
        fh.set_eval_frame(previous)
        entries = fh.cache_entries(add.__code__)
        fh.reset()
    assert len(made) == 2
    assert all(isinstance(e.guard, fh.GuardProgram) for e in entries)
    assert sorted(e.hits for e in entries) == [0, 1]


class _Conv:
    def forward(self) -> None:
        pass


class _OtherConv(_Conv):
    pass


def test_a_class_guard_read_through_many_instances_is_loaded_once() -> None:
    # each instance's `type(m).forward` guards, one per module of a model (hrnet: 952):
    # with the instance's type checked, `type(m)` is that class, loaded and checked once
    f_locals = {f"m{i}": _Conv() for i in range(5)}
    guards = []
    for name in f_locals:
        m = LocalSource(name)
        guards.append(Guard.from_value(m, K.TYPE_MATCH, f_locals[name]))
        forward = AttrSource(TypeSource(m), "forward")
        guards.append(Guard(forward, K.ID_MATCH, _Conv.forward))
    compiled = compile_guards(guards, {}, f_locals=f_locals)
    ops = [op for op, *_ in compiled.native.instructions]
    assert ops.count("CHECK_IS") == 1 and "LOAD_TYPE" not in ops
    assert agree(compiled, f_locals)
    f_locals["m3"] = _OtherConv()  # a subclass: its own TYPE_MATCH fails
    assert not agree(compiled, f_locals)


def test_a_class_guard_without_its_type_check_still_reads_the_type() -> None:
    f_locals = {"m": _Conv()}
    forward = AttrSource(TypeSource(LocalSource("m")), "forward")
    compiled = compile_guards([Guard(forward, K.ID_MATCH, _Conv.forward)], {}, f_locals=f_locals)
    assert "LOAD_TYPE" in [op for op, *_ in compiled.native.instructions]
    assert agree(compiled, f_locals)

    class Patched(_Conv):
        def forward(self) -> None:
            pass

    f_locals["m"] = Patched()
    assert not agree(compiled, f_locals)


def test_a_tuple_arguments_items_are_read_every_call() -> None:
    """The frame hook knows an f_locals value by its address only, and a freed argument
    tuple's address is soon the next one's: its items are loaded outside the blocks,
    while a module's attributes read through `self` stay in one."""
    code = [
        ("LOAD_ITEM", 3, 0, "pair"),
        ("CHECK_TYPE", 0, 3, tuple),
        ("LOAD_ITEM", 4, 3, 0),
        ("LOAD_ITEM", 5, 0, "self"),
        ("CHECK_TYPE", 0, 5, torch.nn.Linear),
        ("LOAD_ATTR", 6, 5, "training"),
        ("CHECK_IS", 0, 6, True),
        ("LOAD_ATTR", 7, 4, "__globals__"),
    ]
    laid_out = native.with_blocks(code, None)
    (start,) = [i for i, ins in enumerate(laid_out) if ins[0] == "BLOCK"]
    in_block = laid_out[start + 1 : start + 1 + laid_out[start][3]]
    assert ("LOAD_ITEM", 4, 3, 0) not in in_block
    assert ("LOAD_ATTR", 7, 4, "__globals__") in in_block  # a function is held by its stamp
    assert ("LOAD_ATTR", 6, 5, "training") in in_block and ("CHECK_TYPE", 0, 3, tuple) in in_block
    assert ("LOAD_ITEM", 4, 3, 0) in laid_out[:start]
    assert sorted(map(repr, laid_out[:start] + laid_out[start + 1 :])) == sorted(map(repr, code))


def test_values_rebuilt_where_the_old_ones_were_freed() -> None:
    """Each call's arguments are new objects, often at the address the last call's were
    freed from (tuples come from a freelist): the native guard, its blocks recorded,
    answers as the Python guard for every rebuild."""
    rng = random.Random(0)
    L = LocalSource

    def values(n: int, flag: bool) -> dict[str, Any]:
        holder = Holder()
        holder.flag, holder.cfg = flag, {"a": n, "b": (1, n)}
        return {"pair": (torch.randn(n), torch.randn(n + 1)), "obj": holder, "t": (n, "x")}

    f_locals, f_globals = values(2, True), {"__builtins__": {}}

    def g(source: Source, kind: GuardKind) -> Guard:
        return Guard.from_value(source, kind, source.get(f_locals, f_globals))

    obj = L("obj")
    guards = [
        g(L("pair"), K.TYPE_MATCH),
        g(L("pair"), K.LEN_MATCH),
        g(ItemSource(L("pair"), 0), K.TENSOR_MATCH),
        g(ItemSource(L("pair"), 1), K.TENSOR_MATCH),
        g(obj, K.TYPE_MATCH),
        g(AttrSource(obj, "flag"), K.EQUALS_MATCH),
        g(AttrSource(obj, "cfg"), K.DICT_KEYS),
        g(ItemSource(AttrSource(obj, "cfg"), "b"), K.EQUALS_MATCH),
        g(ItemSource(L("t"), 0), K.EQUALS_MATCH),
    ]
    compiled = compile_guards(guards, f_globals, f_locals=f_locals)
    assert agree(compiled, f_locals) and agree(compiled, f_locals)
    assert any(state == "recorded" for state, *_ in compiled.native.blocks)
    answers, kept, reused = [], [], 0
    for _ in range(200):
        new = values(rng.choice((2, 2, 3)), rng.random() < 0.8)
        kept.append(list(f_locals["pair"]))  # its tensors outlive the tuple
        a, b = new.pop("pair")
        old, f_locals["pair"] = id(f_locals["pair"]), None  # freed: the next tuple's address
        f_locals["pair"] = (a, b)
        reused += id(f_locals["pair"]) == old
        if rng.random() < 0.2:  # else the module-like object stays, and its block with it
            f_locals.update(new)
        answers.append(agree(compiled, f_locals))
    assert set(answers) == {True, False} and reused > 100
