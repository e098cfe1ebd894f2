"""The ops protocol and its handlers, on a hand-written body."""

import pytest
import sympy
import torch

from ember_inductor_ir import (
    OP_NAMES,
    DtypeHandler,
    PrinterHandler,
    ReadWriteHandler,
    VerificationError,
)
from ember_inductor_ir.handlers.interpret import InterpretHandler
from ember_inductor_ir.indexing import index_vars


def body(ops, index):
    i0, i1 = index
    x = ops.load("a", 4 * i0 + i1)
    y = ops.masked(
        ops.lt(ops.index_expr(i1, torch.int64), ops.constant(2, torch.int64)),
        lambda: ops.load("a", 4 * i0 + i1 + 2),
        0.0,
    )
    ops.store("out", 4 * i0 + i1, ops.add(ops.exp(x), y))


def test_protocol_lists_about_fifty_ops():
    assert 50 <= len(OP_NAMES) <= 100
    assert {"load", "store", "masked", "reduction", "index_expr", "where", "random_bits"} <= set(
        OP_NAMES
    )


def test_printer():
    printer = PrinterHandler()
    body(printer, index_vars("i", 2))
    assert printer.lines[0] == "tmp0 = load(a, 4*i0 + i1)"
    assert any(line.startswith("masked(") for line in printer.lines)
    assert printer.lines[-1] == "store(out, 4*i0 + i1, tmp7)"


def test_read_write_sets():
    rw = ReadWriteHandler()
    body(rw, index_vars("i", 2))
    assert [n for n, _ in rw.reads] == ["a", "a"]
    assert rw.writes == [("out", 4 * index_vars("i", 2)[0] + index_vars("i", 2)[1])]


def test_dtype_propagation_and_errors():
    dt = DtypeHandler({"a": torch.float32})
    body(dt, index_vars("i", 2))
    assert dt.stored == {"out": torch.float32}
    with pytest.raises(VerificationError):
        dt.add(torch.float32, torch.float16)


def test_interpreter_masks_out_of_range_loads():
    a = torch.randn(3, 4)
    out = torch.empty(12)
    i0, i1 = index_vars("i", 2)
    bindings = {i0: torch.arange(3).reshape(3, 1), i1: torch.arange(4).reshape(1, 4)}
    handler = InterpretHandler(
        {"a": a.reshape(-1), "out": out}, bindings, (3, 4), (), torch.device("cpu")
    )
    body(handler, [i0, i1])
    shifted = torch.zeros(3, 4)
    shifted[:, :2] = a[:, 2:]
    torch.testing.assert_close(out.reshape(3, 4), a.exp() + shifted)
    assert isinstance(4 * i0, sympy.Expr)
