"""One native call per run of kernels between extern calls (launch_runs.py): the wrapper
calls each run's entry point instead of each kernel, counted on real calls."""

import pytest
import torch

from ember_codegen import KernelRuntimeError
from ember_primops import prims


def _three_kernels_then_mm_then_two(x, w):
    # column sums, row sums and a full-size exp cannot share one loop nest: a run of
    # kernels; then an extern; then a second run reading the extern's result
    a = prims.exp(x)
    col = prims.sum(a, [0])
    row = prims.sum(prims.sin(x), [1])
    y = prims.mm(a, w)
    y_col = prims.sum(prims.tanh(y), [0])
    y_row = prims.sum(prims.cos(y), [1])
    return (col, row, y_col, y_row)


def _counting(compiled):
    """Wrap every native function the wrapper calls; returns the call counter."""
    namespace = compiled._call.__globals__
    calls: dict[str, int] = {}
    for name, fn in list(namespace.items()):
        if name.startswith(("_k_", "_run_")):

            def counted(*args, _fn=fn, _name=name):
                calls[_name] = calls.get(_name, 0) + 1
                return _fn(*args)

            namespace[name] = counted
    return calls


def _sched_groups(sched):
    """The schedule as 'E' (extern) / 'K' (loops group) letters, in order."""
    return "".join("E" if g.extern is not None else "K" for g in sched)


def test_a_run_of_kernels_is_one_native_call(check):
    x, w = torch.randn(16, 24), torch.randn(24, 8)
    sched, compiled = check(_three_kernels_then_mm_then_two, x, w, atol=1e-4, rtol=1e-4)
    groups = _sched_groups(sched)
    runs = [len(r) for r in groups.split("E") if r]
    assert max(runs) >= 2, groups  # the graph does have runs of several kernels
    assert [len(r.kernels) for r in compiled.runs] == [n for n in runs if n >= 2]
    assert compiled.native_calls == len(runs) < compiled.kernel_count
    calls = _counting(compiled)
    compiled([x, w])
    assert sum(calls.values()) == len(runs)
    assert all(name.startswith("_run_") for name in calls) or min(runs) == 1
    for run in compiled.runs:  # an entry point per run, in the same shared object
        assert f"EMBER_KERNEL void {run.name}(" in compiled.cpp_source
        assert f"_{run.name}(" in compiled.wrapper_source


def test_frees_wait_for_the_call_of_their_run(check):
    x, w = torch.randn(16, 24), torch.randn(24, 8)
    _, compiled = check(_three_kernels_then_mm_then_two, x, w, atol=1e-4, rtol=1e-4)
    lines = [line.strip() for line in compiled.wrapper_source.splitlines()]
    for run in compiled.runs:
        (at,) = [k for k, line in enumerate(lines) if line.startswith(f"_{run.name}(")]
        for buffer in run.pointers:  # alive (and not in the pool) from its pointer to the call
            (read,) = [k for k, line in enumerate(lines) if line.startswith(f"p_{buffer} =")]
            assert not [line for line in lines[read:at] if _frees(line, buffer)]
    # a free after an extern call is not deferred
    after_mm = lines.index("_mm_out(buf0, arg1, out=buf3)")
    assert "del buf0" in lines[after_mm + 1 : after_mm + 3]


def _frees(line: str, buffer: str) -> bool:
    """Whether ``line`` drops ``buffer`` or hands its storage on (pool, allocation slot)."""
    return (
        line == f"del {buffer}"
        or line.startswith((f"_pool.give({buffer},", f"del {buffer};"))
        or (line.startswith("_slots[") and line.endswith(f".append({buffer})"))
    )


def test_buffers_reused_inside_a_run_keep_values_over_calls(check):
    def chain(x):
        a = prims.exp(x)
        b = prims.sum(a, [0])  # a dies here: its storage may serve a later kernel of the run
        c = prims.sin(prims.add(x, prims.broadcast_in_dim(b, [32, 48], [1])))
        d = prims.sum(c, [1])
        return (prims.mul(c, prims.broadcast_in_dim(d, [32, 48], [0])),)

    x = torch.randn(32, 48)
    _, compiled = check(chain, x, atol=1e-4, rtol=1e-4)
    assert compiled.native_calls == 1 < compiled.kernel_count


def test_a_failing_kernel_stops_its_run_and_names_itself(compile_prims):
    def f(x, y):
        q = prims.floor_divide(x, y)
        s = prims.sum(q, [0])  # a second kernel after the one that can fail
        return (prims.add(q, prims.broadcast_in_dim(s, [3, 4], [1])), s)

    a = torch.arange(12).reshape(3, 4) + 1
    _, compiled = compile_prims(f, a, torch.ones(3, 4, dtype=torch.int64))
    assert compiled.runs and compiled.runs[0].may_fail
    zeros = torch.ones(3, 4, dtype=torch.int64)
    zeros[1, 2] = 0
    failing = next(k.name for k in compiled.runs[0].kernels if k.may_fail)
    with pytest.raises(KernelRuntimeError, match=f"kernel {failing}: ZeroDivisionError"):
        compiled([a, zeros])
    good = compiled([a, torch.full((3, 4), 2, dtype=torch.int64)])  # the error was reset
    q = torch.div(a, 2, rounding_mode="floor")
    torch.testing.assert_close(good[1], q.sum(0))


def test_a_lone_kernel_reads_each_pointer_once(check):
    def f(x, w, w2):
        # a lone kernel: the mm's result dies in it (no float64 buffer can take its storage)
        z = prims.convert_element_type(prims.exp(prims.mm(x, w)), torch.float64)
        y = prims.mm(z, w2)
        return (prims.sum(prims.tanh(y), [0]), prims.sum(prims.cos(y), [1]))  # then a run

    inputs = (torch.randn(16, 24), torch.randn(24, 8) / 4, torch.randn(8, 8, dtype=torch.float64))
    _, compiled = check(f, *inputs, atol=1e-4, rtol=1e-4)
    assert compiled.runs and compiled.native_calls == 2
    reads = [line.split("=")[0].strip() for line in compiled.wrapper_source.splitlines()]
    reads = [name for name in reads if name.startswith("p_")]
    assert len(reads) == len(set(reads)), compiled.wrapper_source
