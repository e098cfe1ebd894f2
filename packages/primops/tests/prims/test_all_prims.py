"""Per-prim checks over generated samples: reference vs eager, meta and fake vs reference."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils import _pytree as pytree

from ember_primops import all_prims, get_prim

from .samples import SAMPLES, Sample, samples

CASES = [
    pytest.param(p.name, i, id=f"{p.name}-{i}")
    for p in all_prims()
    if p.name in SAMPLES
    for i in range(len(samples(p.name)))
]


def test_every_prim_has_samples():
    missing = [p.name for p in all_prims() if p.name not in SAMPLES or not samples(p.name)]
    assert not missing, f"prims without test samples: {missing}"


def _eager(prim, sample: Sample):
    fn = sample.oracle or prim.eager
    return None if fn is None else fn(*sample.args, **sample.kwargs)


def _assert_same_meta(got, expected, what: str) -> None:
    got_flat, expected_flat = pytree.tree_leaves(got), pytree.tree_leaves(expected)
    assert len(got_flat) == len(expected_flat), what
    for g, e in zip(got_flat, expected_flat, strict=False):
        if e is None:
            assert g is None, what
            continue
        assert g.shape == e.shape, f"{what}: shape {g.shape} != {e.shape}"
        assert g.dtype == e.dtype, f"{what}: dtype {g.dtype} != {e.dtype}"
        if e.numel() > 1:
            assert g.stride() == e.stride(), f"{what}: strides {g.stride()} != {e.stride()}"


def _to_meta(x):
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, torch.device):
        return torch.device("meta")
    return x


@pytest.mark.parametrize("name,index", CASES)
def test_prim(name: str, index: int):
    prim = get_prim(name)
    sample = samples(name)[index]
    if sample.cuda and not torch.cuda.is_available():
        pytest.skip("a CUDA-only prim (its meta is tested on the meta device)")
    op = prim.overload
    try:
        expected = _eager(prim, sample)
    except (RuntimeError, NotImplementedError) as e:
        pytest.skip(f"eager does not support this sample: {e}")
    out = op(*sample.args, **sample.kwargs)

    # 1. values against eager PyTorch
    if sample.values and expected is not None:
        out_leaves = pytree.tree_leaves(out)
        exp_leaves = pytree.tree_leaves(expected)
        assert len(out_leaves) == len(exp_leaves)
        for o, e in zip(out_leaves, exp_leaves, strict=False):
            if e is None:
                assert o is None
                continue
            torch.testing.assert_close(
                o,
                e.to(o.dtype) if isinstance(e, torch.Tensor) else e,
                equal_nan=True,
                check_dtype=False,
                atol=sample.atol,
                rtol=sample.rtol,
            )
    # Non-view prims never alias their inputs.
    if not prim.is_view:
        inputs = {
            t.untyped_storage().data_ptr()
            for t in pytree.tree_leaves(sample.args)
            if isinstance(t, torch.Tensor) and t.numel()
        }
        for o in pytree.tree_leaves(out):
            if isinstance(o, torch.Tensor) and o.numel():
                assert o.untyped_storage().data_ptr() not in inputs, "result aliases an input"

    # 2. meta tensors: same shape, dtype and strides as the reference result
    meta_args, meta_kwargs = pytree.tree_map(_to_meta, (sample.args, sample.kwargs))
    _assert_same_meta(op(*meta_args, **meta_kwargs), out, "meta vs reference")

    # 3. FakeTensorMode: same again, on the fake device
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake_args, fake_kwargs = pytree.tree_map(
            lambda x: mode.from_tensor(x) if isinstance(x, torch.Tensor) else x,
            (sample.args, sample.kwargs),
        )
        fake_out = op(*fake_args, **fake_kwargs)
    _assert_same_meta(fake_out, out, "fake vs reference")
    for o in pytree.tree_leaves(fake_out):
        if isinstance(o, torch.Tensor):
            assert o.device.type == "cpu"
