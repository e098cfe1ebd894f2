"""Random prims: determinism, offsets, distribution, and the documented bit algorithm."""

from __future__ import annotations

import math

import pytest
import torch

from ember_primops import prims

CPU = torch.device("cpu")
MASK = 0xFFFFFFFF


def _mix32_py(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK
    return x ^ (x >> 16)


def _bits_py(seed: int, stream: int, n: int) -> int:
    """Plain-integer transcription of the README algorithm (what C++/Triton implement)."""
    seed_lo, seed_hi = seed & MASK, (seed >> 32) & MASK
    key = _mix32_py(_mix32_py(seed_hi ^ ((0x9E3779B9 * (stream + 1)) & MASK)) ^ seed_lo)
    return _mix32_py(_mix32_py((n & MASK) ^ key) ^ (n >> 32))


@pytest.mark.parametrize("seed", [0, 1234, -5, 2**40 + 3])
@pytest.mark.parametrize("offset", [0, 7, 2**32 - 2])
def test_bits_match_the_documented_integer_algorithm(seed, offset):
    got = prims.random_bits([2, 3], torch.tensor(seed), offset, device=CPU).flatten().tolist()
    assert got == [_bits_py(seed, 0, offset + i) for i in range(6)]


def test_uniform_is_the_top_bits_of_random_bits():
    seed = torch.tensor(99)
    bits = prims.random_bits([64], seed, 3, device=CPU)
    u = prims.uniform([64], seed, 3, dtype=torch.float32, device=CPU)
    assert torch.equal(u, (bits >> 8).to(torch.float32) * 2.0**-24)


def test_same_seed_and_offset_give_the_same_values():
    seed = torch.tensor(42)
    for op in (prims.uniform, prims.normal):
        a = op([100], seed, 10, dtype=torch.float32, device=CPU)
        b = op([100], seed, 10, dtype=torch.float32, device=CPU)
        assert torch.equal(a, b)
        # A shifted offset is a shifted stream: element i at offset o == element i+1 at o-1.
        c = op([101], seed, 9, dtype=torch.float32, device=CPU)
        assert torch.equal(a, c[1:])


def test_different_offsets_and_seeds_differ():
    seed = torch.tensor(42)
    a = prims.uniform([1000], seed, 0, dtype=torch.float64, device=CPU)
    b = prims.uniform([1000], seed, 1000, dtype=torch.float64, device=CPU)
    c = prims.uniform([1000], torch.tensor(43), 0, dtype=torch.float64, device=CPU)
    assert (a != b).float().mean() > 0.99 and (a != c).float().mean() > 0.99


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_uniform_statistics(dtype):
    n = 200_000
    u = prims.uniform([n], torch.tensor(2024), 0, dtype=dtype, device=CPU)
    assert u.dtype == dtype and float(u.min()) >= 0.0 and float(u.max()) < 1.0
    x = u.double()
    # mean 1/2, variance 1/12; 6-sigma bounds
    assert abs(float(x.mean()) - 0.5) < 6 * math.sqrt(1 / 12 / n) + 2.0**-9
    assert abs(float(x.var()) - 1 / 12) < 0.003
    # chi-square over 16 bins (15 dof): far below the 99.99% quantile (~ 45)
    counts = torch.histc(x, bins=16, min=0, max=1)
    expected = n / 16
    assert float(((counts - expected) ** 2 / expected).sum()) < 45


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_normal_statistics(dtype):
    n = 200_000
    z = prims.normal([n], torch.tensor(77), 5, dtype=dtype, device=CPU).double()
    assert abs(float(z.mean())) < 6 / math.sqrt(n) + 0.01 * (dtype == torch.bfloat16)
    assert abs(float(z.std()) - 1) < 0.01
    assert abs(float((z.abs() < 1).double().mean()) - 0.6827) < 0.01
    assert torch.isfinite(z).all()


def test_next_seed_draws_from_the_default_generator():
    torch.manual_seed(0)
    a = prims.next_seed(CPU)
    torch.manual_seed(0)
    b = prims.next_seed(CPU)
    c = prims.next_seed(CPU)
    assert a.dtype == torch.int64 and a.ndim == 0
    assert int(a) == int(b) and int(b) != int(c)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="draws on a GPU")
def test_next_seed_on_cuda_draws_on_the_device_from_the_cuda_generator():
    cuda = torch.device("cuda")
    cpu_state = torch.get_rng_state()
    torch.cuda.manual_seed(5)
    a = prims.next_seed(cuda)
    torch.cuda.manual_seed(5)
    b, c = prims.next_seed(cuda), prims.next_seed(cuda)
    assert a.device.type == "cuda" and a.dtype == torch.int64 and a.ndim == 0
    assert int(a) == int(b) and int(b) != int(c)
    assert torch.equal(torch.get_rng_state(), cpu_state)  # the CPU generator is not touched


def test_attention_dropout_state_stays_where_it_is_outside_capture_on_the_host():
    from ember_primops.attention import philox_state_for_backward

    seed, offset = torch.tensor(3), torch.tensor(4)
    for p in (0.0, 0.1):
        got = philox_state_for_backward(seed, offset, p)
        assert got[0] is seed and got[1] is offset
