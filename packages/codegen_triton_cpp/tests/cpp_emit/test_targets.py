"""The code generators' capability records (ember_inductor_ir's ``Target``), declared beside
their op tables: registered by device type, each covering the loop IR's ``ops`` or declaring
a decomposition for what it lacks (as tinygrad's renderers declare what they can do), and
read by the loop IR where it lowers differently for them."""

from __future__ import annotations

from typing import ClassVar

import torch
from prim_helpers import prim_graph

from ember_codegen import CPP_TARGET, TRITON_TARGET
from ember_codegen.cpp.emit.ops_handler import CppOpsHandler
from ember_codegen.targets import TARGETS
from ember_codegen.triton.ops_handler import TritonOpsHandler
from ember_codegen.value_scopes import ScopedValues
from ember_inductor_ir import (
    OP_NAMES,
    OUT_VARIANT_PRIMS,
    lower,
    registered_targets,
    resolve_target,
    target_for_device,
)
from ember_inductor_ir.extern import ExternKernel
from ember_primops import prims

HANDLERS = {"cpp": CppOpsHandler, "triton": TritonOpsHandler}


def test_targets_are_registered_by_name_and_device_type():
    assert target_for_device("cpu") is CPP_TARGET and target_for_device("cuda") is TRITON_TARGET
    assert resolve_target("cpp") is CPP_TARGET and resolve_target("triton") is TRITON_TARGET
    assert {t.name for t in TARGETS} <= set(registered_targets())


def test_every_target_covers_the_ir_ops_or_declares_their_decomposition():
    for target in TARGETS:
        assert target.missing_ops() == set(), (target.name, sorted(target.missing_ops()))
        assert target.ops <= set(OP_NAMES), target.name
        # the record says what the handler emits: its methods and its op table
        handler = HANDLERS[target.name]
        assert target.ops == {n for n in OP_NAMES if handler.implements(n)}
        assert dict(target.decompositions) == dict(handler.DECOMPOSITIONS)


def test_the_cpp_record_hands_to_libraries_what_its_loops_do_poorly():
    assert CPP_TARGET.fold_matmul_epilogues and CPP_TARGET.batch_step_matmuls
    assert CPP_TARGET.out_variant_prims == OUT_VARIANT_PRIMS
    assert CPP_TARGET.cat_extern_inputs == 8 and CPP_TARGET.symbolic_sizes
    policy = CPP_TARGET.channels_last  # NCHW training, NHWC inference and weight gradients
    assert policy.inference and not policy.training and policy.weight_gradients


def test_the_triton_record_keeps_it_as_loop_ir_and_trains_channels_last():
    assert not TRITON_TARGET.fold_matmul_epilogues and not TRITON_TARGET.batch_step_matmuls
    assert TRITON_TARGET.out_variant_prims == frozenset()
    assert TRITON_TARGET.cat_extern_inputs is None and TRITON_TARGET.symbolic_sizes
    policy = TRITON_TARGET.channels_last
    assert policy.inference and policy.training and policy.weight_gradients


def test_lowering_by_name_reads_the_registered_record():
    x = torch.randn(3, 5)

    def cat8(a):
        return (prims.cat([prims.mul(a, prims.sin(a)) for _ in range(8)], 0),)

    cpp = lower(prim_graph(cat8, x), [x], target="cpp")
    assert cpp.target is CPP_TARGET
    (cat,) = [op for op in cpp.operations if isinstance(op, ExternKernel)]
    assert cat.kernel_name == "cat" and cat.writes_out
    triton = lower(prim_graph(cat8, x), [x], target="triton")
    assert not [op for op in triton.operations if isinstance(op, ExternKernel)]
    assert lower(prim_graph(cat8, x), [x]).target is CPP_TARGET  # CPU inputs: "cpp"


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)


class _Kernel:
    def __init__(self) -> None:
        self.count = 0

    def new_tmp(self) -> str:
        self.count += 1
        return f"t{self.count - 1}"


class _Value(str):
    dtype = torch.float32


class _HandlerWithoutHypot(ScopedValues[str]):
    """A handler whose table lacks ``hypot`` and declares it over ``sqrt``, ``add``, ``mul``."""

    OPS: ClassVar[dict] = {
        name: (lambda *a, n=name: f"{n}({', '.join(a)})") for name in ("sqrt", "add", "mul")
    }
    BOOL_RESULT_OPS = frozenset()
    TARGET = "test"
    DECOMPOSITIONS: ClassVar[dict] = {
        "hypot": lambda ops, a, b: ops.sqrt(ops.add(ops.mul(a, a), ops.mul(b, b)))
    }

    def __init__(self) -> None:
        super().__init__()
        self.kernel, self.out = _Kernel(), _Writer()

    def declare(self, name: str, expr: str, dtype: torch.dtype) -> tuple[str, str]:
        return f"{name} = {expr}", _Value(name)


def test_a_declared_decomposition_is_emitted_through_the_ops_it_uses():
    handler = _HandlerWithoutHypot()
    assert not _HandlerWithoutHypot.implements("hypot") and _HandlerWithoutHypot.implements("mul")
    result = handler.hypot(_Value("a"), _Value("b"))
    assert handler.out.lines == ["t0 = mul(a, a)", "t1 = mul(b, b)", "t2 = add(t0, t1)",
                                 "t3 = sqrt(t2)"]  # fmt: skip
    assert result == "t3"
