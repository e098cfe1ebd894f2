"""The Triton target of ember-codegen: loop-IR kernel groups -> Triton kernels + a Python
wrapper (see README.md, "Triton target"). Needs the ``triton`` extra; importing
ember_codegen does not."""

from __future__ import annotations

from typing import Any

from ember_codegen.exc import CodegenError

from .compiled import compile_triton as compile_impl


def compile_triton(sched: Any, **options: Any) -> Any:
    """``compile_graph(sched, target="triton", **options)``; see compiled.compile_triton."""
    try:
        import triton  # noqa: F401
    except ImportError as exc:
        raise CodegenError(
            "compile_graph(target='triton') needs Triton: pip install 'ember-codegen[triton]' "
            "(or use target='cpp' for CPU graphs)"
        ) from exc
    return compile_impl(sched, **options)
