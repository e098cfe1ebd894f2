"""The except clauses whose try body may go into a graph (translator/raising_handlers.py), read
from each Python version's own bytecode: torch-free, so it runs on 3.11 and 3.12 here."""

from __future__ import annotations

import builtins

import pytest

from ember_bytecode_tracer.bytecode import decode
from ember_bytecode_tracer.translator.raising_handlers import handler_always_raises


class UserError(Exception):
    pass


def note(error):
    return error


def reraises_clearer(t):
    try:
        t = t[0]
    except IndexError as e:
        raise IndexError("the first row is missing") from e
    return t


def reraises_bare(t):
    try:
        t = t[0]
    except (IndexError, KeyError):
        raise
    return t


def reraises_with_keywords(t):
    try:
        t = t[0]
    except OSError as e:
        raise OSError(2, "gone", filename=None) from e
    return t


def swallows(t):
    try:
        t = t[0]
    except IndexError:
        t = None
    return t


def returns_from_handler(t):
    try:
        t = t[0]
    except IndexError:
        return None
    return t


def calls_user_code(t):
    try:
        t = t[0]
    except IndexError as e:
        note(e)
        raise
    return t


def raises_a_user_class(t):
    try:
        t = t[0]
    except IndexError as e:
        raise UserError("bad") from e
    return t


def reads_an_attribute(t):
    try:
        t = t[0]
    except IndexError as e:
        raise e.with_traceback(None)  # noqa: B904  (the pattern under test)
    return t


def catches_inside_the_handler(t):
    try:
        t = t[0]
    except IndexError:
        try:
            raise KeyError("inner")
        except KeyError:
            pass
        raise
    return t


def _parts(fn) -> tuple:
    """The decoded code, its index map and the first handler's start."""
    instructions = decode(fn.__code__)
    index_of = {id(inst): i for i, inst in enumerate(instructions)}
    covered = next(i for i in instructions if i.exn_tab_entry is not None)
    start = index_of[id(covered.exn_tab_entry.target)]
    assert instructions[start].opname == "PUSH_EXC_INFO"
    return instructions, index_of, start


def _first_handler(fn) -> bool:
    return handler_always_raises(*_parts(fn), fn.__globals__, vars(builtins))


@pytest.mark.parametrize("fn", [reraises_clearer, reraises_bare, reraises_with_keywords])
def test_handlers_that_only_raise(fn):
    assert _first_handler(fn)


@pytest.mark.parametrize(
    "fn",
    [
        swallows,
        returns_from_handler,
        calls_user_code,
        raises_a_user_class,
        reads_an_attribute,
        catches_inside_the_handler,
    ],
)
def test_handlers_that_may_catch_or_do_more(fn):
    assert not _first_handler(fn)


def test_a_global_shadowing_a_builtin_exception_is_not_trusted():
    namespace = {"IndexError": UserError}
    assert not handler_always_raises(*_parts(reraises_clearer), namespace, vars(builtins))
