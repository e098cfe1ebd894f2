"""Our stages under PyTorch's own tracer: torch.compile(model, backend=<aot_module backend>)."""

import copy

import pytest
import torch

from conftest import CountingCompiler
from ember_aot_autograd import aot_module, min_cut_rematerialization_partition


def make_backend(partition_fn=None):
    fw, bw = CountingCompiler(), CountingCompiler()
    kwargs = {"partition_fn": partition_fn} if partition_fn else {}

    def backend(gm, example_inputs):
        return aot_module(gm, example_inputs, fw, bw, **kwargs)

    return backend, fw, bw


@pytest.mark.parametrize("partition_fn", [None, min_cut_rematerialization_partition])
def test_torch_compile_training_matches_eager(partition_fn):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 12), torch.nn.BatchNorm1d(12), torch.nn.GELU(), torch.nn.Linear(12, 3)
    )
    eager = copy.deepcopy(model)
    backend, fw, bw = make_backend(partition_fn)
    compiled = torch.compile(model, backend=backend)
    for step in range(2):
        x = torch.randn(5, 6)
        out, ref = compiled(x), eager(x)
        torch.testing.assert_close(out, ref)
        out.square().sum().backward()
        ref.square().sum().backward()
        for p, q in zip(model.parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)
        torch.testing.assert_close(model[1].running_mean, eager[1].running_mean)
        assert model[1].num_batches_tracked == eager[1].num_batches_tracked == step + 1
    assert fw.calls == 1 and bw.calls == 1  # the graph was really used, and compiled once


def test_torch_compile_inference_under_no_grad():
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    backend, fw, bw = make_backend()
    compiled = torch.compile(model, backend=backend)
    x = torch.randn(3, 4)
    with torch.no_grad():
        out = compiled(x)
    torch.testing.assert_close(out, model(x))
    assert fw.calls == 1 and bw.calls == 0
