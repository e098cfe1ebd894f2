"""A large graph's kernels are several translation units built in parallel (source.py): each
library holds its kernels and their runs, results equal eager's and the serial build's, a
warm start loads every library from the kernel cache, and a small graph stays one unit."""

from __future__ import annotations

import json

import pytest
import torch
from prim_helpers import compile_fn

from ember_codegen import KernelRuntimeError
from ember_codegen.artifact import from_payload, to_payload
from ember_codegen.cpp import build
from ember_codegen.cpp.emit import source
from ember_primops import prims


def _runs_and_lone_kernels(x, w, d):
    # runs of kernels and lone ones between products, and a kernel that can fail
    a = prims.exp(x)
    col, row = prims.sum(a, [0]), prims.sum(prims.sin(x), [1])
    y = prims.mm(a, w)
    y_col, y_row = prims.sum(prims.tanh(y), [0]), prims.sum(prims.cos(y), [1])
    z = prims.mm(prims.mul(y, y), prims.permute(w, [1, 0]))
    q = prims.floor_divide(prims.convert_element_type(z, torch.int64), d)
    return (col, row, y_col, y_row, prims.sum(prims.neg(z), [1]), prims.sum(q, [0]))


def _inputs():
    x, w = torch.randn(16, 24), torch.randn(24, 8) / 4
    return x, w, torch.full((16, 24), 3, dtype=torch.int64)


@pytest.fixture
def split(monkeypatch):
    """Every kernel worth a unit of its own, up to three units (three compile workers)."""
    monkeypatch.setattr(source, "MIN_UNIT_CHARS", 1)
    monkeypatch.setenv("EMBER_COMPILE_WORKERS", "3")


def test_a_large_graph_is_several_libraries(split, check):
    _, compiled = check(_runs_and_lone_kernels, *_inputs(), atol=1e-4, rtol=1e-4)
    assert len(compiled.units) == len(compiled.libraries) == 3
    assert len({lib.path for lib in compiled.libraries}) == 3
    held = [k.name for unit in compiled.units for k in unit.kernels]
    assert sorted(held) == sorted(k.name for k in compiled.kernels)  # each kernel once
    for unit, library in zip(compiled.units, compiled.libraries, strict=True):
        for run in unit.runs:  # a run and the kernels it calls share a library
            assert set(run.kernel_names) <= {k.name for k in unit.kernels}
        for kernel in unit.kernels:  # bound to the library that holds it
            assert f"EMBER_KERNEL void {kernel.name}(" in library.source_path.read_text()
    assert compiled.units[0].may_fail and not any(u.may_fail for u in compiled.units[1:])


def test_a_failing_kernel_of_a_split_graph_raises(split, compile_prims):
    x, w, d = _inputs()
    _, compiled = compile_prims(_runs_and_lone_kernels, x, w, d)
    assert len(compiled.libraries) == 3
    zero = d.clone()
    zero[2, 5] = 0
    with pytest.raises(KernelRuntimeError, match="ZeroDivisionError"):
        compiled([x, w, zero])
    again = compiled([x, w, d])  # the error was reset
    torch.testing.assert_close(again[0], _runs_and_lone_kernels(x, w, d)[0])


def test_the_serial_build_gives_one_unit_and_the_same_values(split, compile_prims, monkeypatch):
    inputs = list(_inputs())
    _, parallel = compile_prims(_runs_and_lone_kernels, *inputs)
    monkeypatch.setenv("EMBER_COMPILE_WORKERS", "1")
    _, serial = compile_prims(_runs_and_lone_kernels, *inputs)
    assert len(parallel.libraries) == 3 and len(serial.libraries) == 1
    assert serial.cpp_source == source.graph_source(serial.kernels) + "".join(
        f"\n{run.code}\n" for run in serial.runs
    )
    for got, want in zip(parallel(inputs), serial(inputs), strict=True):
        assert torch.equal(got, want)


def test_a_small_graph_stays_one_unit(compile_prims, monkeypatch):
    monkeypatch.setenv("EMBER_COMPILE_WORKERS", "8")
    _, compiled = compile_prims(_runs_and_lone_kernels, *_inputs())
    assert len(compiled.kernels) > 3 and len(compiled.libraries) == 1
    assert compiled.library is compiled.libraries[0]
    assert source.unit_count(compiled.kernels) == 1


class _Refs:
    def __init__(self) -> None:
        self.values: list = []

    def encode(self, value: object) -> list:
        self.values.append(value)
        return ["ref", len(self.values) - 1]

    def decode(self, data: list) -> object:
        return self.values[data[1]]


def test_a_warm_start_loads_every_library_without_building(split, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))  # the default builder's
    inputs = list(_inputs())
    _, compiled = compile_fn(_runs_and_lone_kernels, *inputs, builder=None)  # the default
    refs = _Refs()
    payload = json.loads(json.dumps(to_payload(compiled, refs.encode)))
    assert len(payload["units"]) == 3

    def no_build(*args, **kwargs):
        raise AssertionError("a warm start compiled C++")

    monkeypatch.setattr(build, "build_library", no_build)
    monkeypatch.setenv("EMBER_COMPILE_WORKERS", "1")  # another pool size: the stored split
    rebuilt = from_payload(payload, refs.decode, str(tmp_path / "wrapper.py"))
    assert [lib.path for lib in rebuilt.libraries] == [lib.path for lib in compiled.libraries]
    for got, want in zip(rebuilt(inputs), compiled(inputs), strict=True):
        assert torch.equal(got, want)
