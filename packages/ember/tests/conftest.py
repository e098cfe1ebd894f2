from __future__ import annotations

import pytest

import ember
import ember_frame_hook as fh


@pytest.fixture
def private_kernel_cache(tmp_path, monkeypatch):
    """A cache folder of the test's own: each compile is cold, no file left behind."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    ember.reset()
    yield
    ember.reset()


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    fh.set_eval_frame(None)
    ember.reset()


@ember.backends.symbolic_sizes  # it runs the graph as is: right for every size
class RecordingBackend:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


class CountingBackend:
    """The named backend, counting the graphs it is given (each handles symbolic sizes:
    one compile serves every size)."""

    def __init__(self, name):
        import ember

        self.inner = ember.lookup_backend(name)
        self.graphs = 0
        ember.backends.symbolic_sizes(self)

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.inner(gm, example_inputs)
