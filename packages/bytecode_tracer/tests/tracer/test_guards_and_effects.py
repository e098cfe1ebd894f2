"""Guards, recompilation, the cache limit, side effects and exceptions."""

from __future__ import annotations

import logging

import pytest
import torch

import ember_frame_hook as fh
from conftest import Compiled, same

COUNTER = 0


@pytest.mark.parametrize("native_tensor_check", ["1", "0"])
def test_shape_dtype_and_requires_grad_changes_recompile(monkeypatch, native_tensor_check):
    # "0": tensor guards as attribute reads through one scratch register of the guard
    # program (what runs where the C++ check is not built, as on CPython 3.12 in CI); the
    # last call must hit the dynamic float32 entry, not recompile (issue 29)
    monkeypatch.setenv("EMBER_NATIVE_TENSOR_GUARDS", native_tensor_check)
    compiled = Compiled(lambda a: a * 2)
    inputs = [torch.randn(3), torch.randn(3), torch.randn(4), torch.randn(3).double(),
              torch.randn(3, requires_grad=True), torch.randn(4)]  # fmt: skip
    for t in inputs:
        assert same(compiled(t), t * 2)
    assert compiled.backend.graph_count == 4


def test_constant_arguments_are_guarded():
    compiled = Compiled(lambda a, k: a * k)
    x = torch.randn(3)
    for k in (2, 2, 3, 2.0, True):
        assert same(compiled(x, k), x * k)
    assert compiled.backend.graph_count == 4  # 2, 3, 2.0 and True are all different


def test_global_value_is_guarded():
    global COUNTER
    compiled = Compiled(lambda a: a + COUNTER)
    x = torch.randn(3)
    COUNTER = 1
    assert same(compiled(x), x + 1)
    COUNTER = 5
    assert same(compiled(x), x + 5)
    assert compiled.backend.graph_count == 2


def test_list_length_is_guarded():
    compiled = Compiled(lambda ts: sum(ts[1:], ts[0]))
    x = torch.randn(3)
    assert same(compiled([x, x]), x * 2)
    assert same(compiled([x, x, x]), x * 3)
    assert compiled.backend.graph_count == 2


def test_cache_limit_runs_eagerly_with_one_warning(caplog):
    fh.set_cache_limit(3)
    try:
        compiled = Compiled(lambda a, k: a + k, dynamic=False)  # each k a new trace
        x = torch.randn(2)
        with caplog.at_level(logging.WARNING, logger="ember.tracer"):
            for k in range(10):
                assert same(compiled(x, k), x + k)
        assert compiled.backend.graph_count == 3
        warnings = [r for r in caplog.records if "cache limit" in r.getMessage()]
        assert len(warnings) == 1
        assert "L['k'] == 2" in warnings[0].getMessage()
    finally:
        fh.set_cache_limit(8)


def test_list_mutation_is_replayed():
    def fn(a, out):
        out.append(a * 2)
        out[0] = "first"
        return a + 1

    out1, out2 = ["x"], ["x"]
    x = torch.randn(3)
    expected = fn(x, out1)
    compiled = Compiled(fn)
    got = compiled(x, out2)
    assert same(got, expected)
    assert out2[0] == "first" and same(out2[1], out1[1]) and len(out2) == 2


def test_dict_and_attribute_writes_are_replayed():
    class State:
        pass

    def fn(a, cache, state):
        cache["y"] = a.sum()
        state.last = a * 3
        state.count = 1
        return a

    x = torch.randn(3)
    cache, state = {}, State()
    compiled = Compiled(fn)
    compiled(x, cache, state)
    assert same(cache["y"], x.sum()) and same(state.last, x * 3) and state.count == 1


def test_global_write_is_replayed():
    def fn(a):
        global COUNTER
        COUNTER = 42
        return a.sin()

    compiled = Compiled(fn)
    compiled(torch.randn(2))
    assert COUNTER == 42


def test_exceptions_inside_compiled_region_match_eager():
    def fn(a, b):
        c = a + 1
        return c @ b

    a, b = torch.randn(2, 3), torch.randn(4, 5)
    with pytest.raises(RuntimeError) as eager:
        fn(a, b)
    with pytest.raises(RuntimeError) as compiled:
        Compiled(fn)(a, b)
    assert str(compiled.value) == str(eager.value)


def test_python_exception_after_tensor_code_propagates():
    def fn(a, d):
        b = a * 2
        return b + d["missing"]

    with pytest.raises(KeyError, match="missing"):
        Compiled(fn)(torch.randn(2), {})


def test_no_leak_of_compiled_globals_across_reset():
    compiled = Compiled(lambda a: a.cos())
    compiled(torch.randn(2))
    fh.reset()
    compiled(torch.randn(2))
    assert compiled.backend.graph_count == 2


def test_shadowing_a_builtin_later_recompiles():
    def fn(a):
        return a * len([1, 2])

    compiled = Compiled(fn)
    x = torch.randn(2)
    assert same(compiled(x), x * 2)
    globals()["len"] = lambda seq: 10
    try:
        assert same(compiled(x), x * 10)
    finally:
        del globals()["len"]
    assert compiled.backend.graph_count == 2


def test_recompile_reason_lists_every_entry_and_names_a_missed_lookup():
    from types import SimpleNamespace

    from ember_bytecode_tracer.convert_frame import recompile_reason

    def entry(reason):
        guards = SimpleNamespace(failure_reason=lambda f_locals: reason)
        return SimpleNamespace(record=SimpleNamespace(guards=guards))

    assert recompile_reason((entry("size changed"),), {}) == "size changed"
    text = recompile_reason((entry("dtype changed"), entry(None), object()), {})
    assert text.startswith("dtype changed (older entries: [1] ")
    assert "the cached lookup missed it" in text  # guards pass when re-checked: say so
    assert "[2] the cached code was compiled by another ember.compile call" in text


_PER_THREAD = __import__("threading").local()


def test_a_thread_local_attribute_is_read_and_guarded_per_thread():
    import threading

    def fn(a):
        return a * _PER_THREAD.scale

    a = torch.randn(3)
    compiled = Compiled(fn, fullgraph=True)
    _PER_THREAD.scale = 2.0
    assert same(compiled(a), a * 2.0)
    _PER_THREAD.scale = 5.0
    assert same(compiled(a), a * 5.0)  # the entry is guarded
    seen = []

    def other_thread():
        _PER_THREAD.scale = 7.0  # this thread's own entry
        seen.append(compiled(a))

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert same(seen[0], a * 7.0) and same(compiled(a), a * 5.0)
    assert not compiled.breaks


_SEEN_TABLE = {"k": 1}


def test_id_of_objects_read_from_the_frame_is_a_constant_guarded_by_identity():
    class Tag:
        pass

    class Other:
        pass

    def fn(a, kind, ref):
        memo = {id(_SEEN_TABLE): "table"}
        hit = memo.get(id(_SEEN_TABLE)) == "table"
        return a + (1.0 if id(kind) == ref else 2.0), hit

    a = torch.randn(3)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(a, Tag, id(Tag)), fn(a, Tag, id(Tag)))
    assert same(compiled(a, Other, id(Tag)), fn(a, Other, id(Tag)))  # another class: retraced
    assert compiled.backend.graph_count == 2


def test_id_of_an_object_made_in_the_trace_breaks_and_matches_eager():
    def fn(a):
        made = [a]
        return a + 1, id(made) != 0

    a = torch.randn(3)
    compiled = Compiled(fn)
    assert same(compiled(a), fn(a))
    assert compiled.breaks
