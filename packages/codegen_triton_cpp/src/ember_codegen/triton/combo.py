"""Combined launches: a run of small independent pointwise kernels as one Triton kernel.

The scheduler's ``combine_runs`` (ember_inductor_ir.scheduler.combine) picks the runs under
the target's ``CombinePolicy``; here each run's kernels become device functions taking
their program id as an argument (``kernel3_part(pid, ptr_..., XBLOCK)``: the kernel's own
text, its ``tl.program_id(0)`` replaced), called from one ``@triton.jit`` kernel that hands
each its range of program ids::

    pid = tl.program_id(0)
    if pid < 2:
        kernel3_part(pid, ptr_buf3, ptr_arg3, 64)
    elif pid < 5:
        kernel4_part(pid - 2, ptr_buf4, ptr_arg4, 1024)

and launched once with the sum of their grids. Each part keeps its point count, block size
and index math, so its values are the ones its own launch would write. The run's last group
holds the combined kernel; the others hold none and name it (``GroupKernels.combined_into``).
A run ends at a group after which the plan frees storage, so the others free nothing (the
wrapper would hold such frees until the one launch: wrapper.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ember_inductor_ir import KernelGroup, Schedule
from ember_inductor_ir.scheduler import CombinePolicy, combine_runs

from .heuristics import LaunchConfig
from .kernel import GroupKernels, TritonKernel

log = logging.getLogger("ember.fusion")

#: what a combined kernel's launch passes that no part reads (the launch path's XBLOCK)
COMBO_CONFIG_XBLOCK = 1


def _refusal(group: GroupKernels | None) -> str | None:
    """Why a group's kernels cannot be a part of a combined kernel (None: they can)."""
    if group is None:
        return "a matmul template's epilogue"
    if len(group.kernels) != 1 or group.workspaces:
        return "a split reduction"
    (kernel,) = group.kernels
    if kernel.kind != "pointwise" or kernel.reduction:
        return f"a {kernel.kind} kernel"
    if kernel.size_params:
        return "size arguments"
    return None


def _part_source(kernel: TritonKernel) -> str:
    """The kernel's text as a device function of its program id."""
    header = f"def {kernel.name}("
    if kernel.code.count(header) != 1 or kernel.code.count("tl.program_id(0)") != 1:
        raise AssertionError(f"{kernel.name}: not a kernel of one program id")
    code = kernel.code.replace(header, f"def {kernel.name}_part(pid, ")
    return code.replace("tl.program_id(0)", "pid")


def combined_kernel(name: str, parts: Sequence[TritonKernel]) -> TritonKernel:
    """One kernel running ``parts`` side by side, each over its own range of programs."""
    params: list[str] = []
    for kernel in parts:
        params += [p for p in kernel.params if p not in params]
    lines = [
        f"# one launch for {', '.join(k.name for k in parts)}",
        "@triton.jit",
        f"def {name}({', '.join(f'ptr_{p}' for p in params)}, XBLOCK: tl.constexpr):",
        "    pid = tl.program_id(0)",
    ]
    start = 0
    for k, kernel in enumerate(parts):
        programs = kernel.grid()[0]
        args = ", ".join(
            ["pid" if not start else f"pid - {start}", *(f"ptr_{p}" for p in kernel.params)]
        )
        call = f"{kernel.name}_part({args}, {kernel.config.XBLOCK})"
        if k == len(parts) - 1:  # a run has two parts or more
            lines += ["    else:", f"        {call}"]
        else:
            lines += [f"    {'elif' if k else 'if'} pid < {start + programs}:", f"        {call}"]
        start += programs
    code = "\n\n".join([*(_part_source(k) for k in parts), "\n".join(lines)])
    config = LaunchConfig(
        COMBO_CONFIG_XBLOCK, num_warps=max(k.config.num_warps for k in parts), num_stages=1
    )
    return TritonKernel(name, code, params, "combo", start, False, config)


def combine_groups(
    sched: Schedule,
    groups: list[GroupKernels],
    policy: CombinePolicy | None,
    excluded: set[str] = frozenset(),
) -> list[GroupKernels]:
    """``groups`` with each run the scheduler combines launched as one kernel: the run's last
    group holds it, the others none. ``excluded``: groups that may not take part (matmul
    templates' epilogues)."""
    by_name = {g.name: g for g in groups if g.name not in excluded}

    def eligible(group: KernelGroup) -> str | None:
        return _refusal(by_name.get(group.name))

    for run in combine_runs(sched, policy, eligible):
        members = [by_name[g.name] for g in run]
        last = members[-1]
        name = f"combo_{members[0].name}_{last.name}"
        kernel = combined_kernel(name, [m.kernels[0] for m in members])
        for member in members[:-1]:
            member.kernels = []
            member.combined_into = last.name
        last.kernels = [kernel]
        log.info("%s: one launch of %d programs for %d kernels", name, kernel.xnumel, len(run))
    return groups


__all__ = ["combine_groups", "combined_kernel"]
