"""What a wrapper serving every binding of the size symbols does first, on either target:
read each symbol it uses from the call's inputs into a local named after it
(``s0 = args[0].shape[1]``), then pick the tensor inputs out of ``args``.

A mixin over a target's wrapper builder (the C++ one, cpp/emit/symbolic_wrapper.py; the
Triton one, triton/symbolic_wrapper.py): the builder sets ``binder`` (where each symbol is
read: dynamic_wrapper.SizeBinder) and ``sizes`` (the SymbolicSizes it is built
under, whose ``used`` names the symbols its printed sizes refer to). Target-neutral.
"""

from __future__ import annotations

from typing import Any

import sympy

from ember_codegen.size_printing import NeedsConcreteSizes

_READS = {
    "size": "args[{position}].shape[{dim}]",
    "stride": "args[{position}].stride({dim})",
    "int": "int(args[{position}])",
    # a scalar read on the host (t.item()): the input's element at logical index {dim}
    "item": "args[{position}][{dim}].item()",
    "scalar": "args[{position}]",  # the scalar itself (a read saved for backward)
}


class SymbolicReads:
    """`_unpack_inputs` and `_prologue` of a wrapper called with every graph input (size
    inputs included) that reads the size symbols it uses first."""

    sched: Any
    binder: Any
    sizes: Any
    w: Any

    def _unpack_inputs(self) -> None:
        inputs = self.sched.graph_inputs
        positions = self.binder.tensor_positions
        if not inputs:
            return
        # Always by position: the call passes every graph input, also an int input whose
        # symbol was specialized while tracing (`x.sum(dim=n)`: Eq(s0, 1)), which is then
        # neither a tensor nor a size input (`arg0, = args` would raise on the extra one).
        picked = ", ".join(f"args[{p}]" for p in positions)
        # one input: `a = args[1]` (`a, = args[1]` would iterate the tensor itself)
        self.w.line(f"{', '.join(inputs)} = {picked}")

    def _prologue(self) -> list[str]:
        taken = {*self.sched.buffers, *self.sched.constants, "args", "_r"}
        reads = {str(s) for s in self.sched.scalar_reads}
        asserted = {str(s) for a in self.sched.scalar_asserts for s in a.condition.free_symbols}
        lines = []
        for name in sorted({*self.sizes.used, *reads, *asserted}, key=lambda n: (len(n), n)):
            source = self.binder.sources.get(name)
            if source is None:
                raise NeedsConcreteSizes(f"size symbol {name} is not read from any input")
            if name in taken or name.startswith(("p_", "_")):
                raise NeedsConcreteSizes(f"size symbol {name} collides with a wrapper name")
            kind, position, dim = source
            lines.append(f"    {name} = {_READS[kind].format(position=position, dim=dim)}")
        return lines + host_checks(self.sched.scalar_asserts)


def host_checks(asserts: list[Any]) -> list[str]:
    """``torch._check`` on values read on the host, as the wrapper's lines: RuntimeError as
    eager raises (ember_inductor_ir's ScalarAssert)."""
    lines = []
    for check in asserts:
        text = sympy.pycode(check.condition)
        lines.append(f"    if not {text}:")
        lines.append(f"        raise RuntimeError({check.message!r})")
    return lines
