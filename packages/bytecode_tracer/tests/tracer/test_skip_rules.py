"""Which frames the tracer leaves alone: decided by folder, never by a name prefix."""

from __future__ import annotations

import os
import sysconfig

import torch

from conftest import Compiled
from ember_bytecode_tracer import convert_frame
from ember_bytecode_tracer.convert_frame import is_skipped


def _code_at(filename: str, name: str = "forward"):
    return compile("def f(): pass", filename, "exec").co_consts[0].replace(co_name=name)


def test_a_library_whose_name_starts_with_torch_is_user_code():
    torch_dir = os.path.dirname(torch.__file__)
    # torchvision, torchaudio, torch_geometric sit beside torch: same prefix, other folder
    for sibling in ("torchvision", "torchaudio", "torch_geometric"):
        path = os.path.join(os.path.dirname(torch_dir), sibling, "models", "resnet.py")
        assert not is_skipped(_code_at(path)), sibling


def test_torch_internals_are_skipped_but_nn_module_forwards_are_not():
    torch_dir = os.path.dirname(torch.__file__)
    assert is_skipped(_code_at(os.path.join(torch_dir, "functional.py"), "einsum"))
    conv = os.path.join(torch_dir, "nn", "modules", "conv.py")
    assert not is_skipped(_code_at(conv, "forward"))
    assert is_skipped(_code_at(conv, "_conv_forward"))


def test_standard_library_is_skipped_but_its_site_packages_is_not(monkeypatch):
    stdlib = sysconfig.get_paths()["stdlib"]
    assert is_skipped(_code_at(os.path.join(stdlib, "functools.py"), "reduce"))
    # a Python installed without a venv keeps site-packages inside the stdlib folder
    site_dir = convert_frame._as_dir(os.path.join(stdlib, "site-packages"))
    monkeypatch.setattr(convert_frame, "_INSTALLED_ROOTS", (site_dir,))
    model = os.path.join(site_dir, "transformers", "models", "bert", "modeling_bert.py")
    assert not is_skipped(_code_at(model))
    monkeypatch.setattr(convert_frame, "_INSTALLED_ROOTS", ())
    assert is_skipped(_code_at(model))


class _Shifted(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.shift = 3

    def forward(self, x):
        return x.relu() + x.shape[0] * self.shift  # a size is a tensor while JIT traces


def test_frames_met_while_torch_jit_trace_records_run_as_they_are():
    def build_and_trace(x):
        return torch.jit.trace(_Shifted(), (x,))

    x = torch.randn(3, 4)
    compiled = Compiled(build_and_trace)
    traced = compiled(x)
    y = torch.randn(5, 2)
    # the traced module recorded the real ops (the size became a traced value)
    torch.testing.assert_close(traced(x), _Shifted()(x))
    assert "relu" in str(traced.graph)
    torch.testing.assert_close(compiled(y)(y), _Shifted()(y))


def _square_masked(x, idxs):
    return x.square() * torch.nn.functional.one_hot(idxs, 3)


def test_frames_met_under_a_torch_func_transform_run_as_they_are():
    def jacobian(x, idxs):
        return torch.func.jacfwd(_square_masked, argnums=(0,))(x, idxs)

    idxs = torch.randint(3, (7,))
    x = torch.rand(7, 3, dtype=torch.float64)
    compiled = Compiled(jacobian, dynamic=True)
    torch.testing.assert_close(compiled(x, idxs), jacobian(x, idxs))
    batched = Compiled(lambda v: torch.func.vmap(_square_masked, in_dims=(0, None))(v, idxs[:3]))
    v = torch.rand(4, 3, 3, dtype=torch.float64)
    expected = torch.func.vmap(_square_masked, in_dims=(0, None))(v, idxs[:3])
    torch.testing.assert_close(batched(v), expected)
