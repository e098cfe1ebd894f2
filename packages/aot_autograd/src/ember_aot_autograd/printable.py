"""Graph source that compiles for every aten overload, whatever its name.

FX prints an op overload as its qualified name, `torch.ops.aten.random.from(...)`, and
`random.from` / `random_.from` are named after a Python keyword: the graph module's generated
source is a SyntaxError. Graphs built here print such a target as
`getattr(torch.ops.aten.random, 'from')(...)`, which names the same overload.
"""

from __future__ import annotations

import keyword
import re
from typing import Any

import torch.fx

_KEYWORD_OVERLOAD = re.compile(r"\b(torch\.ops\.\w+\.\w+)\.(" + "|".join(keyword.kwlist) + r")\(")


class KeywordSafeCodeGen(torch.fx.graph.CodeGen):
    def _gen_python_code(self, *args: Any, **kwargs: Any) -> Any:
        code = super()._gen_python_code(*args, **kwargs)
        code.src = _KEYWORD_OVERLOAD.sub(r"getattr(\1, '\2')(", code.src)
        return code


def keyword_safe(graph: torch.fx.Graph) -> None:
    """Prints `graph`'s keyword-named overloads through getattr (plain FX codegen only)."""
    if type(graph._codegen) is torch.fx.graph.CodeGen:
        graph.set_codegen(KeywordSafeCodeGen())
