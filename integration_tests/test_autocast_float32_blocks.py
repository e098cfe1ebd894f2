"""A float32 block inside a bfloat16 autocast region (autocast switched off around a batched
product, as Llama's rotary embedding does), compiled with the default backend on both code
generators: the C++ target and the Triton target (Triton's CPU interpreter). The compiled
graph already holds autocast's casts; run again under the caller's autocast, the library
product came back as bfloat16 into a buffer planned as float32 and the Triton kernels read
it as float32 (garbage here, an illegal memory access on the GPU). Each case runs in a child
process so that TRITON_INTERPRET is set before triton is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import json, torch, ember

    torch.manual_seed(0)
    rates = torch.rand(16)
    mix = torch.nn.Linear(32, 32, bias=False)

    def embed(x, positions):
        wide = rates[None, :, None].expand(positions.shape[0], -1, 1)
        with torch.autocast("cpu", enabled=False):
            turns = (wide @ positions[:, None, :].float()).transpose(1, 2)  # float32 bmm
            both = torch.cat((turns, turns), dim=-1)
            cos, sin = both.cos(), both.sin()
        y = mix(x)  # bfloat16 under the enclosing autocast
        return y * cos.to(y.dtype) + y.flip(-1) * sin.to(y.dtype), cos

    x = torch.randn(2, 24, 32)
    positions = torch.arange(24)[None].expand(2, 24)
    compiled = ember.compile(embed)
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
        expected = embed(x, positions)
        for _ in range(2):
            got = compiled(x, positions)
    assert [g.dtype for g in got] == [torch.bfloat16, torch.float32]
    torch.testing.assert_close(got[1], expected[1], rtol=0, atol=1e-5)  # the float32 block
    # the bfloat16 sum: fused, it rounds once where eager rounds each op (one bf16 step)
    error = (got[0].float() - expected[0].float()).norm() / expected[0].float().norm()
    assert error < 1e-2, error
    print(json.dumps(dict(ember.counters["inductor"])))
    """
)

TARGETS = {
    "cpp": {},
    "triton": {"TRITON_INTERPRET": "1", "EMBER_INDUCTOR_TARGET": "triton"},
}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_float32_block_under_bf16_autocast(target, tmp_path):
    if target == "triton":
        pytest.importorskip("triton", reason="the Triton target needs the 'triton' extra")
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache"), **TARGETS[target]}
    for key in set(TARGETS["triton"]) - set(TARGETS[target]):
        env.pop(key, None)
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-4000:]
    stats = json.loads(out.stdout.strip().splitlines()[-1])
    assert stats["forward_graphs"] == 1 and stats["forward_runs"] == 2
    assert stats["kernels"] > 0
