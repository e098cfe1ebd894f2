"""Objects of `typing` (aliases, special forms, type variables, `list[int]`, `int | None`)
in traced code: built, read and compared at trace time as the constants they are, in one
graph, matching eager (issue 26; integration_tests/test_typing_values_inductor.py runs the
same under the default backend)."""

# The typing spellings (typing.List, Optional, Union) are what these tests are about.
# ruff: noqa: UP006, UP007, UP045

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import torch

from conftest import Compiled, same

Item = typing.TypeVar("Item")


class Holder(typing.Generic[Item]):
    pass


def accepts(value, hint) -> bool:
    """A small runtime type checker, written the way validating libraries write theirs."""
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        return any(accepts(value, option) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is collections.abc.Callable:
        return callable(value)
    if origin is not None:
        return isinstance(value, origin)
    return isinstance(value, hint)


@dataclasses.dataclass
class Settings:
    mode: typing.Optional[str] = None
    hook: typing.Optional[typing.Callable[[int], int]] = None
    sizes: typing.Dict[str, typing.Tuple[int, ...]] = dataclasses.field(default_factory=dict)


SETTINGS = Settings()


def test_a_validator_over_dataclass_hints_is_one_graph():
    hints = typing.get_type_hints(Settings)

    def fn(x):
        SETTINGS.mode = "regression"
        checks = [
            accepts(getattr(SETTINGS, f.name), hints[f.name]) for f in dataclasses.fields(SETTINGS)
        ]
        return x * 2 if all(checks) else x

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(4)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_typing_objects_built_in_the_trace():
    def fn(x):
        callback = typing.Callable[[int], int]
        abc_callback = collections.abc.Callable[[int], float]
        table = typing.Optional[typing.Dict[str, typing.List[int]]]
        boxed = Holder[int]
        n = len(typing.get_args(callback)) + len(typing.get_args(abc_callback))
        n += len(typing.get_args(table)) + (typing.get_origin(boxed) is Holder)
        n += (list[int] == typing.get_args(typing.Optional[list[int]])[0]) + (
            (int | None) is not None
        )
        n += callback.__origin__ is collections.abc.Callable
        return x + n

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_a_typing_argument_is_guarded_by_identity():
    def fn(x, hint):
        if typing.get_origin(hint) is typing.Union:
            return x + len(typing.get_args(hint))
        return x - 1

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    for hint in (typing.Optional[int], typing.List[int], typing.Union[int, str, None]):
        assert same(compiled(x, hint), fn(x, hint))
    assert compiled.backend.graph_count == 3  # each hint is another trace


def test_a_bad_subscript_raises_as_eager():
    def fn(x):
        try:
            typing.List[int, str]
        except TypeError:
            return x + 1
        return x

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))


# Annotations that are types, not strings (this module's own are strings: `from __future__
# import annotations`), made the way code generators make them.
MadeSettings = dataclasses.make_dataclass(
    "MadeSettings", [("mode", typing.Optional[str]), ("count", int), ("hook", typing.Any)]
)


def _typed_callback(t, scale=None):
    return t


_typed_callback.__annotations__ = {
    "t": torch.Tensor,
    "scale": typing.Optional[float],
    "return": torch.Tensor,
}


def test_get_type_hints_of_a_class_and_a_function_is_answered_now():
    def fn(x):
        fields = typing.get_type_hints(MadeSettings)
        params = typing.get_type_hints(_typed_callback)
        n = sum(typing.get_origin(hint) is typing.Union for hint in fields.values())
        if params["t"] is torch.Tensor and params["return"] is torch.Tensor:
            return x * n + len(typing.get_args(params["scale"]))
        return x

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_get_type_hints_of_string_annotations_breaks():
    def annotated_later(t: torch.Tensor) -> torch.Tensor:
        return t

    def fn(x):
        return x + len(typing.get_type_hints(annotated_later))

    compiled = Compiled(fn)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.breaks or compiled.compiler.skipped  # evaluated in unguarded globals
