"""Guard soundness: each kind of source a trace reads through, rebound or mutated between
calls; every call is compared with eager. Guards must follow what an object is, never its
name."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from conftest import Compiled, same

my_torch_op = torch.sin


def _uses_torch_named_global(x):
    return my_torch_op(x) + 1


def test_global_whose_name_contains_torch_keeps_its_identity_guard():
    global my_torch_op
    compiled = Compiled(_uses_torch_named_global)
    x = torch.randn(3)
    try:
        assert same(compiled(x), _uses_torch_named_global(x))
        my_torch_op = torch.cos
        assert same(compiled(x), _uses_torch_named_global(x))
    finally:
        my_torch_op = torch.sin
    assert compiled.backend.graph_count == 2


# --- one test per source kind: compiled vs eager on every call, rebinding in between ---


def _check(fn, args_fn, mutations):
    """Calls compiled `fn` and eager `fn` after each mutation (the first call with none)."""
    compiled = Compiled(fn)
    for mutate in [None, *mutations]:
        if mutate is not None:
            mutate()
        args = args_fn()
        assert same(compiled(*args), fn(*args)), f"after {getattr(mutate, '__name__', mutate)}"
    assert compiled.backend.graph_count >= 1
    return compiled


def _x():
    return (torch.arange(4.0),)


def test_local_constant_argument():
    compiled = Compiled(lambda a, k: a * k)
    x = torch.arange(3.0)
    for k in (2, 3, 2.5, -1):
        assert same(compiled(x, k), x * k)


SCALE = 2.0
HELPER_TENSOR = torch.ones(4)


def _reads_globals(a):
    return a * SCALE + HELPER_TENSOR


def test_global_constant_and_tensor():
    def set_scale():
        global SCALE
        SCALE = 5.0

    def set_tensor_same_shape():
        global HELPER_TENSOR
        HELPER_TENSOR = torch.full((4,), 7.0)

    def set_tensor_new_dtype():
        global HELPER_TENSOR
        HELPER_TENSOR = torch.ones(4, dtype=torch.float64)

    try:
        _check(_reads_globals, _x, [set_scale, set_tensor_same_shape, set_tensor_new_dtype])
    finally:
        globals().update(SCALE=2.0, HELPER_TENSOR=torch.ones(4))


def test_closure_cell_rebound():
    factor = 2

    def fn(a):
        return a * factor

    def set_factor():
        nonlocal factor
        factor = 9

    _check(fn, _x, [set_factor])


def test_closure_cell_holding_a_function():
    op = torch.sin

    def fn(a):
        return op(a)

    def set_op():
        nonlocal op
        op = torch.cos

    _check(fn, _x, [set_op])


class Holder:
    def __init__(self):
        self.scale = 2
        self.op = torch.relu


HOLDER = Holder()


def _reads_object(a):
    return HOLDER.op(a - 1) * HOLDER.scale


def test_object_attributes():
    def set_scale():
        HOLDER.scale = 4

    def set_op():
        HOLDER.op = torch.tanh

    def replace_object():
        global HOLDER
        HOLDER = Holder()

    _check(_reads_object, _x, [set_scale, set_op, replace_object])


def test_python_module_attributes():
    mod = types.ModuleType("user_helpers")
    mod.factor = 3
    mod.act = torch.sigmoid

    def fn(a):
        return mod.act(a) * mod.factor

    def set_factor():
        mod.factor = 10

    def set_act():
        mod.act = torch.tanh

    _check(fn, _x, [set_factor, set_act])


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("offset", torch.zeros(4))
        self.scale = 1.0
        self.use_act = True

    def forward(self, a):
        y = self.lin(a) * self.scale + self.offset
        return torch.relu(y) if self.use_act else y


def test_module_attributes_parameters_and_buffers():
    torch.manual_seed(0)
    net = Net()

    def set_flag():
        net.use_act = False

    def set_scale():
        net.scale = 3.0

    def replace_parameter():
        net.lin.weight = torch.nn.Parameter(torch.randn(4, 4))

    def mutate_parameter_in_place():
        with torch.no_grad():
            net.lin.bias.add_(1.0)

    def replace_buffer():
        net.offset = torch.full((4,), 2.0)

    def swap_submodule():
        net.lin = torch.nn.Linear(4, 4, bias=False)

    compiled = _check(
        net,
        lambda: (torch.randn(2, 4, generator=torch.Generator().manual_seed(1)),),
        [set_flag, set_scale, replace_parameter, mutate_parameter_in_place, replace_buffer,
         swap_submodule],
    )  # fmt: skip
    assert compiled.backend.graph_count >= 4


TABLE = {"a": 1.0, "b": 2.0}
ITEMS = [1.0, 2.0, 3.0]


def _reads_containers(a):
    return a * TABLE["a"] + sum(ITEMS) + len(TABLE)


def test_dict_items_and_list_items():
    def set_dict_value():
        TABLE["a"] = 10.0

    def add_dict_key():
        TABLE["c"] = 0.0

    def set_list_item():
        ITEMS[1] = 20.0

    def append_list_item():
        ITEMS.append(4.0)

    try:
        _check(
            _reads_containers, _x, [set_dict_value, add_dict_key, set_list_item, append_list_item]
        )
    finally:
        TABLE.clear()
        TABLE.update(a=1.0, b=2.0)
        ITEMS[:] = [1.0, 2.0, 3.0]


class Config:
    factor = 2
    eps = 1e-5


def _reads_class_attributes(a):
    return a * Config.factor + Config.eps


def test_class_attributes():
    def set_factor():
        Config.factor = 7

    def set_eps():
        Config.eps = 1.0

    try:
        _check(_reads_class_attributes, _x, [set_factor, set_eps])
    finally:
        Config.factor, Config.eps = 2, 1e-5


def _with_defaults(a, k=2, op=torch.sin):
    return op(a) * k


def _calls_with_defaults(a):
    return _with_defaults(a)


def test_default_arguments():
    original = _with_defaults.__defaults__

    def set_k():
        _with_defaults.__defaults__ = (5, torch.sin)

    def set_op():
        _with_defaults.__defaults__ = (5, torch.cos)

    try:
        _check(_calls_with_defaults, _x, [set_k, set_op])
    finally:
        _with_defaults.__defaults__ = original


def _uses_builtin(a):
    return a * abs(-3)


def test_builtin_shadowed_by_a_global():
    def shadow():
        globals()["abs"] = lambda v: 100

    def unshadow():
        del globals()["abs"]

    try:
        _check(_uses_builtin, _x, [shadow, unshadow])
    finally:
        globals().pop("abs", None)


def _helper(a):
    return a + 1


def _calls_helper(a):
    return _helper(a) * 2


def test_module_level_function_rebound():
    global _helper
    original = _helper

    def rebind():
        global _helper
        _helper = lambda a: a - 100  # noqa: E731

    try:
        _check(_calls_helper, _x, [rebind])
    finally:
        _helper = original


CONST = 1


def _reads_const(a):
    if CONST is None:
        return a - 2
    if isinstance(CONST, str):
        return a * len(CONST)
    if CONST is True:
        return a - 1
    return a * CONST


@pytest.mark.parametrize(
    "values",
    [(1, 2, 1), (1.5, 2.5), ("ab", "abcd"), (True, False, True), (None, 3, None), (1, True, 1.0)],
    ids=["int", "float", "str", "bool", "none", "int-bool-float"],
)
def test_constant_global_values(values):
    global CONST
    steps = []
    for v in values[1:]:

        def step(v=v):
            global CONST
            CONST = v

        steps.append(step)
    CONST = values[0]
    try:
        _check(_reads_const, _x, steps)
    finally:
        CONST = 1


def test_tensor_dtype_shape_and_requires_grad():
    def fn(a):
        if a.dtype == torch.float64:
            return a * 2
        if a.requires_grad:
            return a * 3
        return a.sum(0) if a.dim() > 1 else a + a.shape[0]

    compiled = Compiled(fn)
    inputs = [torch.ones(3), torch.ones(3, dtype=torch.float64), torch.ones(4),
              torch.ones(2, 3), torch.ones(3, requires_grad=True), torch.ones(3)]  # fmt: skip
    for t in inputs:
        assert same(compiled(t), fn(t))
    assert compiled.backend.graph_count == 5


def test_local_whose_name_contains_torch_is_identity_guarded():
    compiled = Compiled(lambda a, torch_op: torch_op(a))
    x = torch.arange(3.0)
    for op in (torch.sin, torch.cos, torch.sin, torch.nn.functional.relu):
        assert same(compiled(x, op), op(x))
    assert compiled.backend.graph_count == 3


def test_list_reached_through_a_closure_cell_and_an_inlined_function_is_one_list():
    log = []

    def record(v):
        log.append(len(log))
        return v * 2

    def fn(a):
        first = record(a)
        log.append("between")
        return first + record(a)

    x = torch.randn(3)
    expected = fn(x)
    eager_log = list(log)
    compiled = Compiled(fn)
    for _ in range(2):
        log.clear()
        assert same(compiled(x), expected)
        assert log == eager_log == [0, "between", 2]


def test_mutated_lists_that_alias_on_a_later_call_retrace():
    def fn(a, b, x):
        a.append(1)
        return x * len(b)

    compiled = Compiled(fn)
    x = torch.ones(2)
    assert same(compiled([], [], x), fn([], [], x))
    shared, shared_eager = [], []
    assert same(compiled(shared, shared, x), fn(shared_eager, shared_eager, x))
    assert shared == shared_eager == [1]


def test_ambient_autocast_state_is_guarded():
    def fn(a, b):
        return torch.mm(a, b) + 1

    compiled = Compiled(fn)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    assert same(compiled(a, b), fn(a, b))
    for dtype in (torch.bfloat16, torch.float16, torch.bfloat16):
        with torch.autocast("cpu", dtype=dtype):
            expected, got = fn(a, b), compiled(a, b)
        assert got.dtype == expected.dtype == dtype and same(got, expected)
    assert same(compiled(a, b), fn(a, b)) and compiled(a, b).dtype == torch.float32
    assert compiled.backend.graph_count == 3  # none, bf16, fp16


class _Bag:
    pass


BAG = _Bag()


def _reads_optional_attributes(a):
    return a * getattr(BAG, "k", 2) + (1 if hasattr(BAG, "j") else 0)


def test_getattr_default_and_hasattr_guard_the_attribute_presence():
    def set_both():
        BAG.k, BAG.j = 5, None

    def drop_j():
        del BAG.j

    def drop_k():
        del BAG.k

    _check(_reads_optional_attributes, _x, [set_both, drop_j, drop_k])


class _State:
    def __init__(self):
        self.v = 1


STATE = _State()


def _writes_through_argument_reads_through_global(a, obj):
    obj.v = obj.v + 10
    return a * STATE.v


def test_attribute_write_through_one_source_is_seen_through_another():
    compiled = Compiled(_writes_through_argument_reads_through_global)
    x = torch.ones(2)
    for make in (lambda: STATE, _State, lambda: STATE):
        STATE.v = 1
        obj = make()
        expected = _writes_through_argument_reads_through_global(x, obj)
        STATE.v, obj.v = 1, 1
        assert same(compiled(x, obj), expected)


BUMPS = 0


def _bump():
    global BUMPS
    BUMPS += 1
    return BUMPS


def _writes_global_reads_it_through_the_module(a):
    first = _bump()
    return a * first + BUMPS * 10 + sys.modules[__name__].BUMPS * 100


def test_global_write_is_seen_through_the_module_object():
    global BUMPS
    compiled = Compiled(_writes_global_reads_it_through_the_module)
    x = torch.ones(1)
    for _ in range(2):
        BUMPS = 0
        expected = _writes_global_reads_it_through_the_module(x)
        BUMPS = 0
        assert same(compiled(x), expected)
        assert BUMPS == 1
