"""The progress line of slow compiles: drawn on a terminal (a pseudo-TTY here), rewritten in
place with kernel counts, cleared at the end; absent when stderr is not a terminal or
`ember.config.progress` is False."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import textwrap

import pytest
import torch

CHILD = textwrap.dedent(
    """
    import sys, torch, ember, ember.progress
    ember.progress.AFTER_S = 0.0  # the test hook: draw from the start
    ember.config.progress = sys.argv[1] == "on"

    def f(x):
        return (x.sin() * 2).cos().sum(1) + 1

    x = torch.randn(64, 32, device=sys.argv[2])
    out = ember.compile(f, backend="inductor")(x)
    torch.testing.assert_close(out, f(x))
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])
    print("DONE", flush=True)
    """
)


def run_child(tmp_path, setting: str, on_tty: bool, device: str = "cpu") -> str:
    """The child's stdout+stderr; a fresh kernel cache makes it build (a slow compile)."""
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    env.pop("EMBER_LOGS", None)
    command = [sys.executable, "-c", CHILD, setting, device]
    if not on_tty:
        out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout + out.stderr
    leader, follower = pty.openpty()
    process = subprocess.Popen(command, env=env, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=600) == 0, b"".join(chunks)[-3000:]
    return b"".join(chunks).decode(errors="replace")


LINE = re.compile(r"\r(ember: compiling f \(<string>:\d+\) \| [^\r\n]*?)\s*(?=\r)")


@pytest.mark.parametrize(
    "device",
    [
        "cpu",  # C++ builds
        pytest.param(  # Triton builds
            "cuda",
            marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU"),
        ),
    ],
)
def test_line_is_drawn_updated_and_cleared_on_a_terminal(tmp_path, device):
    output = run_child(tmp_path, "on", on_tty=True, device=device)
    lines = LINE.findall(output)
    assert len(lines) >= 2, output  # rewritten in place, more than once
    assert len(set(lines)) >= 2, lines  # and it changes (elapsed time at least)
    assert any(re.search(r"\| kernels \d+/\d+ \|", line) for line in lines), lines
    assert any(re.search(r"\| \d+\.\ds$", line) for line in lines), lines
    assert any("inductor" in line for line in lines), lines  # the stage: the backend
    # cleared at the end: blanks over the line, then the cursor back at its start
    before_done = output[: output.index("DONE")]
    assert re.search(r"\r {20,}\r$", before_done), repr(before_done[-200:])


@pytest.mark.parametrize(("setting", "on_tty"), [("on", False), ("off", True)])
def test_no_line_without_a_terminal_or_with_progress_off(tmp_path, setting, on_tty):
    output = run_child(tmp_path, setting, on_tty)
    assert "DONE" in output
    assert "ember: compiling" not in output and "\r" not in output.replace("\r\n", "\n")


def test_a_narrow_terminal_shortens_the_name_not_the_elapsed_time():
    from ember.progress import fit_line

    head = "ember: compiling GPT2LMHeadModel.forward (modeling_gpt2.py:1040)"
    tail = "aot > lower | kernels 3/12 | 12.3s"
    line = fit_line(head, tail, 49)  # a 50-column terminal
    assert len(line) <= 49 and line.endswith(tail) and "\u2026" in line
    assert (
        fit_line("ember: compiling f (x.py:1)", tail, 200)
        == f"ember: compiling f (x.py:1) | {tail}"
    )


def test_a_decorated_forward_is_named_after_its_module():
    import functools

    from ember.progress import _describe

    def decorator(func):
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):  # transformers' generic wrapper has this shape
            return func(self, *args, **kwargs)

        return wrapper

    class Tiny(torch.nn.Module):
        @decorator
        def forward(self, x):
            return x + 1

    model = Tiny()
    wrapper_code = Tiny.forward.__code__  # the wrapper's code; `func` is the real forward
    f_locals = {"self": model, "args": (), "kwargs": {}, "func": Tiny.forward.__wrapped__}
    assert _describe(wrapper_code, f_locals).startswith("Tiny.forward (test_progress.py:")
    plain = _describe(Tiny.forward.__wrapped__.__code__, {"self": model, "x": 1})
    assert plain.startswith("Tiny.forward (")
    assert _describe(decorator.__code__, {"func": len}).startswith(
        "test_a_decorated_forward_is_named_after_its_module.<locals>.decorator ("
    )


def test_a_backends_before_trace_hook_runs_before_each_frame_is_traced():
    """A backend function's BEFORE_TRACE_ATTR hook (the inductor backend starts its Triton
    build workers there) is found through the wrappers around it and runs before the frame
    is traced: before the backend sees the graph, once per frame compiled."""
    import functools

    import ember
    from ember.backends.registry import BEFORE_TRACE_ATTR

    events = []

    def backend(gm, example_inputs, tag):
        events.append(("backend", tag))
        return gm.forward

    setattr(backend, BEFORE_TRACE_ATTR, lambda: events.append(("before trace", None)))

    def f(x):
        return x.sin() + 1

    compiled = ember.compile(f, backend=functools.partial(backend, tag="partial"))
    compiled(torch.randn(3))
    compiled(torch.randn(3))  # a hit: nothing traced
    compiled(torch.randn(3, 2))  # another size: traced again
    assert events[:2] == [("before trace", None), ("backend", "partial")]
    assert events.count(("before trace", None)) == 2, events


def test_the_inductor_backend_starts_build_workers_only_where_cuda_runs(monkeypatch):
    import ember.backends.inductor as inductor_backend
    from ember.backends.registry import BEFORE_TRACE_ATTR

    started = []
    monkeypatch.setattr(inductor_backend, "start_build_workers", lambda: started.append(1))
    hook = getattr(inductor_backend.inductor, BEFORE_TRACE_ATTR)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    hook()
    assert started == []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    hook()
    assert started == [1]
