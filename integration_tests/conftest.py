"""Cross-package tests. Puts tools/ on sys.path so tests can use its helpers, and holds the
fixtures several test files share."""

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def output_code(monkeypatch):
    """The generated C++ and wrappers logged so far (``ember.output_code``), as one text."""
    monkeypatch.setenv("EMBER_LOGS", "output_code")  # read by each compile
    logger = logging.getLogger("ember.output_code")
    handler, level = _Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield lambda: "\n".join(handler.messages)
    logger.removeHandler(handler)
    logger.setLevel(level)


def _train_like_eager(model, reference, compiled, batch, *, steps=2, rtol, atol) -> None:
    """`steps` MSE training steps of `compiled` (over `model`) and of `reference` (eager, an
    equal copy) on the same batches: each step's parameter gradients must match."""
    import torch  # here: this conftest also serves sessions without torch

    for _ in range(steps):
        x, y = batch()
        for m, fn in ((model, compiled), (reference, reference)):
            m.zero_grad()
            torch.nn.functional.mse_loss(fn(x), y).backward()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=rtol, atol=atol)


@pytest.fixture
def train_like_eager():
    """`train_like_eager(model, reference, compiled, batch, rtol=, atol=)`: see above."""
    return _train_like_eager


@pytest.fixture
def fresh_ember(tmp_path, monkeypatch):
    """Ember reset before and after the test, with its own artifact cache: a test's graph
    counts are its own."""
    import ember  # here: this conftest also serves sessions without torch

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    ember.reset()
    yield
    ember.reset()


@pytest.fixture
def private_ember_cache(tmp_path, monkeypatch):
    """An empty artifact cache of the test's own and no compiled code before or after it."""
    import ember  # here: this conftest also serves sessions without torch

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    ember.reset()
    yield
    ember.reset()


class _Counted:
    """ember.compile(fn) through a named backend, keeping each graph it was handed; the
    recording wrapper declares symbolic sizes where the named backend does, so it is
    handed the graphs that backend would be."""

    def __init__(self, fn, backend: str, **options) -> None:
        import ember  # here: this conftest also serves sessions without torch
        from ember.backends import handles_symbolic_sizes, lookup_backend, symbolic_sizes

        inner = lookup_backend(backend)
        self.graphs: list = []

        def record(gm, example_inputs):
            self.graphs.append(gm)
            return inner(gm, example_inputs)

        if handles_symbolic_sizes(backend):
            record = symbolic_sizes(record)
        self.compiled = ember.compile(fn, backend=record, **options)

    def __call__(self, *args, **kwargs):
        return self.compiled(*args, **kwargs)

    @property
    def ops(self) -> list[str]:
        """The call targets of every graph handed over, by name."""
        return [
            getattr(n.target, "__name__", str(n.target))
            for gm in self.graphs
            for n in gm.graph.nodes
            if n.op.startswith("call")
        ]


@pytest.fixture
def counted_compile():
    """The class `counted_compile(fn, backend, **options)`: a compile that keeps its graphs."""
    return _Counted
