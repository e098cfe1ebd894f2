"""Where the generated wrapper launches matmul templates (hooks of TritonWrapperBuilder).

A template with an epilogue runs where the epilogue group ran (the first reader of the matmul
output, so everything else it reads exists by then); the extern's place keeps only the output
buffer's allocation when the output is also read elsewhere. The storages the memory plan
freed after the extern (the matmul's operands among them) stay alive until the template has
run, and no buffer allocated meanwhile takes them over. A template without an epilogue runs
where the extern ran. The buffers written are the same as before, so the rest of the wrapper
does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ember_inductor_ir.extern import ExternKernel

from .template_choice import TemplateKernel


class TemplateSites:
    def __init__(self, templates: Sequence[TemplateKernel]) -> None:
        self.by_extern = {t.extern_group: t for t in templates}
        self.by_epilogue = {t.epilogue_group: t for t in templates if t.epilogue_group}
        self._extern_names: dict[int, str] = {}
        #: storages freed after an extern whose template has not run yet -> its epilogue
        self.pinned: dict[str, str] = {}
        #: pinned storages whose planned reuser was given a fresh one: nobody takes them now
        self.refused: set[str] = set()

    def bind(self, sched: Any) -> None:
        self._extern_names = {id(g.extern): g.name for g in sched if g.extern is not None}

    @property
    def replaced_groups(self) -> set[str]:
        return set(self.by_extern) | set(self.by_epilogue)

    def _launch(self, builder: Any, template: TemplateKernel) -> None:
        kwargs = [f"{k}={v}" for k, v in template.launch_kwargs().items()]
        args = ", ".join([*template.params, *kwargs])
        builder.w.line(f"_k_{template.name}[{template.grid()}]({args})  # matmul template")

    def at_extern(self, builder: Any, extern: ExternKernel) -> bool:
        """True when a template took over this extern (its lines are written)."""
        template = self.by_extern.get(self._extern_names.get(id(extern), ""))
        if template is None:
            return False
        if template.store_out:
            builder._allocate(template.spec.out)
        if template.epilogue_group is None:
            self._launch(builder, template)
        else:
            builder.w.line(f"# {template.spec.out}: computed by {template.name} below")
        return True

    def at_loops(self, builder: Any, group_name: str) -> bool:
        """True when this loops group is a template's epilogue (the template is launched)."""
        template = self.by_epilogue.get(group_name)
        if template is None:
            return False
        self._launch(builder, template)
        return True

    def free(self, builder: Any, group_name: str, free: Callable[[str], None]) -> None:
        template = self.by_extern.get(group_name)
        if template is not None and template.epilogue_group is not None:
            for name in builder.sched.frees.get(group_name, []):
                self.pinned[name] = template.epilogue_group
            return
        free(group_name)
        released = [n for n, until in self.pinned.items() if until == group_name]
        for name in released:
            del self.pinned[name]
            if name in builder.live and (name not in builder.reused or name in self.refused):
                builder._release(name, builder.w.line)

    def allocate(self, builder: Any, name: str, allocate: Callable[[str], None]) -> None:
        plan = builder.sched.allocations.get(name)
        donor = plan.reuses if plan is not None else None
        if donor is None or donor not in self.pinned or donor not in builder.live:
            allocate(name)
            return
        builder.live.discard(donor)  # still read by a pending template: allocate fresh
        self.refused.add(donor)
        try:
            allocate(name)
        finally:
            builder.live.add(donor)
