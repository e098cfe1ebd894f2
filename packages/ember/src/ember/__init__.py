"""Ember: a Python-level JIT compiler for PyTorch.

model = ember.compile(model)            # or @ember.compile, or backend="..."
ember.explain(fn)(*args)                # graphs, breaks and guards of one run
ember.mark_dynamic(x, 0)                # dim 0 of x symbolic from the first compile
ember.graph_break()                     # end the graph here (a no-op when run eagerly)
"""

from __future__ import annotations

from ember import exc
from ember.backends import list_backends, lookup_backend, register_backend
from ember.compile_api import OptimizedModule, compile, disable, reset, run
from ember.config import config
from ember.explain import ExplainOutput, explain
from ember.export import Exported, ExportGuardError, export
from ember.stance import set_stance
from ember.stats import counters
from ember_bytecode_tracer.directives import graph_break, register_graph_break
from ember_bytecode_tracer.dynamic import mark_dynamic, mark_static, maybe_mark_dynamic
from ember_bytecode_tracer.guard_failures import GuardFailure

__version__ = "0.1.0"
__all__ = [
    "ExplainOutput",
    "ExportGuardError",
    "Exported",
    "GuardFailure",
    "OptimizedModule",
    "compile",
    "config",
    "counters",
    "disable",
    "exc",
    "explain",
    "export",
    "graph_break",
    "list_backends",
    "lookup_backend",
    "mark_dynamic",
    "mark_static",
    "maybe_mark_dynamic",
    "register_backend",
    "register_graph_break",
    "reset",
    "run",
    "set_stance",
]
