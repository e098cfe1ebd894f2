"""aot's trace of example values with symbolic sizes runs under the Python dispatcher
(symbolic.symbolic_dispatch): aten's C++ composites that read `tensor.sizes()` (F.pad's
constant_pad_nd anywhere; on a machine with a GPU, matmul and friends on CUDA fakes) would
turn each size into a constant, an `Eq(s0, 9)` guard and one compile per length.

CUDA fakes need torch's CUDA build (/work/venv312 has one; no GPU needed); the CPU-only
build skips those cases."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ember_aot_autograd import trace_to_aten

es = pytest.importorskip("ember_symbolic")

needs_cuda_build = pytest.mark.skipif(
    not torch.backends.cuda.is_built(),
    reason="fake CUDA tensors need torch's CUDA build (run under /work/venv312)",
)


def _matmul_broadcast(x, w, *_):
    return (x @ w).relu()


def _batched_matmul(x, w, *_):
    return (x @ x.transpose(-1, -2)).softmax(-1) @ x


def _pad(x, w, *_):
    return F.pad(x, (1, 2)) * 2


def _sdpa(x, w, *_):
    b, t, d = x.shape
    q = x.view(b, t, 2, d // 2).transpose(1, 2)
    return F.scaled_dot_product_attention(q, q, q, is_causal=True).transpose(1, 2)


def _gpt2_block(x, w, wa, ba, lw, lb, pos):
    """GPT-2's attention block as HF writes it (Conv1D's addmm over a flattened view, the
    fused projection split in three, a causal mask, tanh GELU, a loss over shifted ids)."""
    b, t, d = x.shape
    h = F.layer_norm(x + pos[:t], (d,), lw, lb, 1e-5)
    qkv = torch.addmm(ba, h.view(-1, h.size(-1)), wa).view(b, t, 3 * d)
    q, k, v = (z.view(b, t, 2, d // 2).transpose(1, 2) for z in qkv.split(d, dim=2))
    mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    o = F.gelu(a.transpose(1, 2).contiguous().view(b, t, d) @ w + x, approximate="tanh")
    ids = torch.zeros(b * (t - 1), dtype=torch.long, device=x.device)
    return F.cross_entropy(o[:, :-1].reshape(-1, d), ids)


CASES = {
    "matmul_broadcast": _matmul_broadcast,
    "batched_matmul": _batched_matmul,
    "pad": _pad,
    "sdpa": _sdpa,
    "gpt2_block": _gpt2_block,
}


def _args(length):
    torch.manual_seed(0)
    shapes = [(2, length, 32), (32, 32), (32, 96), (96,), (32,), (32,), (64, 32)]
    return [torch.randn(s) for s in shapes]


def _fakes(env, args, device):
    """Fakes on `device`, the length of the first argument symbolic."""
    mode = es.fake_mode(env)
    fakes = []
    for i, arg in enumerate(args):
        dims = {1: es.Dim(es.DimDynamic.DUCK)} if i == 0 else {}
        meta = es.meta_tensor(env, arg, f"a{i}", dims=dims, default=es.DimDynamic.STATIC)
        with torch._C._DisableTorchDispatch():
            fake = mode.fake_tensor_converter.from_meta_and_device(mode, meta, torch.device(device))
        fakes.append(fake)
    return fakes


def _trace(name, device):
    env = es.ShapeEnv()
    fakes = _fakes(env, _args(9), device)
    before = [g.code for g in env.render_guards()]
    gm = trace_to_aten(CASES[name], fakes, shape_env=env)
    added = [g.code for g in env.render_guards() if g.code not in before]
    return gm, added


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=needs_cuda_build), "cpu"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_symbolic_trace_adds_no_size_guard(name, device):
    gm, added = _trace(name, device)
    # F.pad specialized the length on both devices before (constant_pad_nd reads sizes())
    assert not [g for g in added if "== 9" in g or "!= 9" in g], added
    out = gm.graph.output_node().args[0][0].meta["val"]
    assert out.dim() == 0 or any(isinstance(s, torch.SymInt) for s in out.shape)


@pytest.mark.parametrize("name", sorted(CASES))
def test_symbolic_cpu_graph_equals_eager_at_other_lengths(name):
    gm, _ = _trace(name, "cpu")
    for length in (5, 9, 14):
        args = _args(length)
        got = gm(*args)
        want = CASES[name](*args)
        torch.testing.assert_close(got[0], want)


def test_python_dispatcher_only_for_symbolic_traces():
    seen = []

    def probe(x, w, *_):
        key = torch._C.DispatchKey.PythonDispatcher
        seen.append(torch._C._dispatch_tls_is_dispatch_key_included(key))
        return x + 1

    trace_to_aten(probe, _args(9))
    env = es.ShapeEnv()
    trace_to_aten(probe, _fakes(env, _args(9), "cpu"), shape_env=env)
    assert seen == [False, True]
