"""BLOCK: a run of checks skipped while the dicts and classes it read are unchanged.

Each test records a block (a passing run), checks that the next run skips it (the block
stays 'recorded' and the registers after it hold the same objects), then changes what the
block read and checks that the program notices: a skipped block must answer as running it
would.
"""

from __future__ import annotations

import types
from collections import OrderedDict

import ember_frame_hook as fh

L, G, B = 0, 1, 2


class Module:
    """An object with an instance dict, a dict of children and hook dicts."""

    scale = 2  # a plain class attribute

    def __init__(self, **kw):
        self.hooks = OrderedDict()
        self.children = {}
        self.__dict__.update(kw)


class Other(Module):
    pass


def program(*code, nregs=16, f_globals=None):
    f_globals = {} if f_globals is None else f_globals
    return fh.GuardProgram(tuple(code), nregs, f_globals, {})


def block(*code):
    return (("BLOCK", 0, -1, len(code)), *code)


def module_program(f_globals=None):
    """L['m'].stride == (2, 2), L['m'].hooks empty, L['m'].children['c'] is a Module,
    type(L['m']).scale == 2; then (outside the block) a check on the child register."""
    return program(
        ("LOAD_ITEM", 3, L, "m"),
        *block(
            ("CHECK_TYPE", 0, 3, Module),
            ("LOAD_ATTR", 4, 3, "stride"),
            ("CHECK_TYPE", 0, 4, tuple),
            ("CHECK_EQ", 0, 4, (2, 2)),
            ("LOAD_ATTR", 5, 3, "hooks"),
            ("CHECK_TYPE", 0, 5, OrderedDict),
            ("CHECK_KEYS", 0, 5, []),
            ("LOAD_ATTR", 6, 3, "children"),
            ("LOAD_ITEM", 7, 6, "c"),
            ("CHECK_TYPE", 0, 7, Module),
            ("LOAD_ATTR", 8, 3, "scale"),
            ("CHECK_EQ", 0, 8, 2),
        ),
        ("LOAD_ATTR", 9, 7, "stride"),  # reads the block's register 7: restored when skipped
        ("CHECK_EQ", 0, 9, 1),
        f_globals=f_globals,
    )


def fresh():
    return Module(stride=(2, 2), children={"c": Module(stride=1)})


def warm(p, f_locals):
    assert p(f_locals) and p(f_locals)
    ((state, *_),) = p.blocks
    assert state == "recorded"


def test_a_recorded_block_is_skipped_and_its_registers_set_again():
    p, f_locals = module_program(), {"m": fresh()}
    assert p.blocks == (("unrecorded", 2, 14, 0, -1),)
    warm(p, f_locals)
    for _ in range(3):
        assert p(f_locals)  # register 7 (the child) read after the block


def test_each_change_to_what_the_block_read_fails_the_guard():
    changes = {
        "attribute": lambda m: setattr(m, "stride", (1, 1)),
        "attribute removed": lambda m: delattr(m, "stride"),
        "hook added": lambda m: m.hooks.__setitem__(1, print),
        "child replaced": lambda m: m.children.__setitem__("c", object()),
        "child's class": lambda m: setattr(m.children["c"], "__class__", Other),
        "class": lambda m: setattr(m, "__class__", Other),
        "instance dict replaced": lambda m: setattr(m, "__dict__", {**m.__dict__, "stride": 3}),
        "class attribute": lambda m: setattr(Module, "scale", 3),
        "instance shadows class": lambda m: setattr(m, "scale", 3),
        "child's stride (after the block)": lambda m: setattr(m.children["c"], "stride", 2),
    }
    for name, change in changes.items():
        p, f_locals = module_program(), {"m": fresh()}
        warm(p, f_locals)
        try:
            change(f_locals["m"])
            assert not p(f_locals), name
        finally:
            Module.scale = 2
        f_locals["m"] = fresh()  # and a new module with the same state passes again
        assert p(f_locals), name


def test_a_changed_attribute_set_back_passes():
    p, f_locals = module_program(), {"m": fresh()}
    warm(p, f_locals)
    f_locals["m"].stride = (3, 3)
    assert not p(f_locals)
    f_locals["m"].stride = (2, 2)
    assert p(f_locals) and p(f_locals)


def test_what_no_stamp_covers_runs_always():
    class Prop:
        @property
        def value(self):
            return self.box[0]

    cases = {
        "a property": (
            ("LOAD_ATTR", 4, 3, "value"),
            ("CHECK_EQ", 0, 4, 1),
        ),
        "a list": (  # mutable in place: no version to stamp
            ("LOAD_ATTR", 4, 3, "box"),
            ("LOAD_ITEM", 5, 4, 0),
            ("CHECK_EQ", 0, 5, 1),
        ),
    }
    for name, code in cases.items():
        obj = Prop()
        obj.box = [1]
        p = program(("LOAD_ITEM", 3, L, "x"), *block(*code))
        assert p({"x": obj}) and p({"x": obj}), name
        ((state, start, _, _, unstamped),) = p.blocks
        assert state == "run always" and unstamped >= start, name
        obj.box[0] = 2
        assert not p({"x": obj}), name


def test_an_ordered_dict_reordered_is_seen():
    p = program(
        ("LOAD_ITEM", 3, L, "x"),
        *block(("LOAD_ATTR", 4, 3, "hooks"), ("CHECK_KEYS", 0, 4, ["a", "b"])),
    )
    m = Module(hooks=OrderedDict(a=1, b=2))
    assert p({"x": m}) and p({"x": m})
    assert p.blocks[0][0] == "run always"  # move_to_end writes no dict version
    m.hooks.move_to_end("a")
    assert not p({"x": m})


def test_a_global_rebound_fails_the_guard():
    f_globals = {"nn": Module}
    p = program(*block(("LOAD_ITEM", 3, G, "nn"), ("CHECK_IS", 0, 3, Module)), f_globals=f_globals)
    assert p({}) and p({}) and p.blocks[0][0] == "recorded"
    f_globals["nn"] = Other
    assert not p({})
    f_globals["nn"] = Module
    assert p({})


def test_a_value_that_changes_every_call_stops_being_recorded():
    p, f_locals = module_program(), {"m": fresh()}
    for i in range(20):
        f_locals["m"].counter = i  # a write to the instance dict, each call
        assert p(f_locals)
    assert p.blocks[0][0] == "run always" and p.blocks[0][4] == -1


def test_a_failing_block_is_not_recorded():
    p, f_locals = module_program(), {"m": fresh()}
    f_locals["m"].stride = (1, 1)
    assert not p(f_locals) and not p(f_locals)
    assert p.blocks[0][0] == "unrecorded"


def test_blocks_must_fit_the_program():
    for code in (
        (("BLOCK", 0, -1, 3), ("LOAD_ITEM", 3, L, "x")),
        (("BLOCK", 0, -1, 2), ("BLOCK", 0, -1, 1), ("LOAD_ITEM", 3, L, "x")),
        (("BLOCK", 0, -1, 0),),
    ):
        try:
            program(*code)
        except ValueError as e:
            assert "BLOCK" in str(e)
        else:
            raise AssertionError(code)


def test_a_tuple_argument_known_by_address_makes_its_block_run_always():
    """A register from before the block is the same address, not the same object: the
    old argument may be freed and its address given to the next (tuples come from a
    freelist). A tuple holding more than plain data is not held by the stamp, so its
    items cannot be vouched for and its block runs always."""
    p = program(
        ("LOAD_ITEM", 3, L, "x"),
        *block(("CHECK_TYPE", 0, 3, tuple), ("LOAD_ITEM", 4, 3, 0)),
        ("CHECK_IS_NOT", 0, 4, None),
    )
    f_locals = {"x": (object(), 1)}
    assert p(f_locals) and p(f_locals)
    assert p.blocks[0][0] == "run always"


def test_a_new_tuple_at_a_freed_tuples_address_is_read_again():
    first, second = object(), object()
    p = program(
        ("LOAD_ITEM", 3, L, "x"),
        *block(("CHECK_TYPE", 0, 3, tuple), ("LOAD_ITEM", 4, 3, 0)),
        ("CHECK_IS", 0, 4, first),
    )
    f_locals = {"x": (first, 1)}
    assert p(f_locals) and p(f_locals)
    reused = False
    for _ in range(50):  # the freelist usually hands the same address back at once
        old = id(f_locals["x"])
        f_locals["x"] = None
        f_locals["x"] = (second, 1)
        reused |= id(f_locals["x"]) == old
        assert not p(f_locals)
        f_locals["x"] = None
        f_locals["x"] = (first, 1)
        assert p(f_locals)
    assert reused, "no address was reused: the test did not test"


def test_plain_data_and_functions_are_held_by_their_stamp():
    """Plain data (a hyperparameter an earlier block read) and functions (whose globals
    a later load reads) are held alive by the register's stamp, so their address cannot
    be another object's while the block is recorded: the block is recorded, and a new
    value fails it."""

    def fn():
        return 1

    other = types.FunctionType(fn.__code__, {"elsewhere": True})
    p = program(
        ("LOAD_ITEM", 3, L, "x"),
        ("LOAD_ITEM", 5, L, "f"),
        *block(("CHECK_EQ", 0, 3, (1, 2)), ("LOAD_ATTR", 4, 5, "__globals__")),
        ("CHECK_IS", 0, 4, fn.__globals__),
    )
    assert p({"x": (1, 2), "f": fn}) and p({"x": (1, 2), "f": fn})
    assert p.blocks[0][0] == "recorded"
    for _ in range(20):
        assert not p({"x": (1, 3), "f": fn})  # a new tuple, wherever it lands
        assert not p({"x": (1, 2), "f": other})
        assert p({"x": (1, 2), "f": fn})


def test_an_instance_dict_made_after_recording_is_seen():
    """An int subclass's instances make their dict at the first attribute set: a class
    attribute read while there was none is shadowed once one is set."""

    class Flag(int):
        scale = 2

    p = program(
        ("LOAD_ITEM", 3, L, "x"),
        ("LOAD_ITEM", 5, L, "y"),
        *block(("LOAD_ATTR", 4, 5, "flag"), ("LOAD_ATTR", 6, 4, "scale"), ("CHECK_EQ", 0, 6, 2)),
    )
    holder = Module(flag=Flag(1))
    assert p({"x": 0, "y": holder}) and p({"x": 0, "y": holder})
    assert p.blocks[0][0] == "recorded"
    holder.flag.scale = 3
    assert not p({"x": 0, "y": holder})


def test_a_run_inside_a_run_of_the_same_program_leaves_the_blocks_alone():
    """A property the guard reads may call the compiled function again: the inner run
    runs every block in full and records nothing, while the outer run may be reading or
    recording the same blocks' stamps."""
    seen = []

    class Reentrant(Module):
        @property
        def value(self):
            seen.append(p({"m": Module(stride=(2, 2), value=1)}))  # would record the block
            seen.append(p.blocks[0][0])
            return 1

    p = program(
        ("LOAD_ITEM", 3, L, "m"),
        *block(
            ("LOAD_ATTR", 4, 3, "stride"),
            ("CHECK_EQ", 0, 4, (2, 2)),
            ("LOAD_ATTR", 5, 3, "value"),
            ("CHECK_EQ", 0, 5, 1),
        ),
    )
    assert p({"m": Reentrant(stride=(2, 2))})
    assert seen == [True, "unrecorded"]
    assert p.blocks[0][0] == "run always"  # the outer run read a property
    assert p({"m": Module(stride=(2, 2), value=1)}) and p.blocks[0][0] == "run always"
