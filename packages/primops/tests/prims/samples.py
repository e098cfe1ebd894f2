"""Sample inputs for every prim, keyed by prim name (filled by ``@samples_for`` and by the
category generators). ``Sample.oracle`` overrides the prim's eager op; ``values=False`` marks
prims whose values are unspecified (empty_*) or random (checked in test_random.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from ember_primops import all_prims
from ember_primops._checks import DTYPE_CLASSES
from ember_primops.elementwise_binary import BINARY, COMPARISON
from ember_primops.elementwise_unary import UNARY
from ember_primops.linalg import LINALG


@dataclass
class Sample:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    oracle: Callable | None = None
    values: bool = True
    atol: float | None = None
    rtol: float | None = None
    cuda: bool = False  # the prim runs only on CUDA tensors (skipped without a GPU)

    def describe(self) -> str:
        def short(x):
            if isinstance(x, torch.Tensor):
                return f"T{list(x.shape)}{str(x.dtype)[6:]}{'' if x.is_contiguous() else 'nc'}"
            if isinstance(x, (list, tuple)):
                return "[" + ",".join(short(v) for v in x) + "]"
            return repr(x)

        return ",".join(short(a) for a in self.args) + (f",{self.kwargs}" if self.kwargs else "")


SAMPLES: dict[str, Callable[[], list[Sample]]] = {}


def samples_for(*names: str):
    def register(fn):
        for n in names:
            SAMPLES[n] = lambda fn=fn, n=n: fn(n)
        return fn

    return register


def samples(name: str) -> list[Sample]:
    return SAMPLES[name]()


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def make(shape, dtype, domain: str = "real", seed: int = 0) -> torch.Tensor:
    """A random tensor of ``dtype`` with values from ``domain``."""
    g = _gen(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not (dtype.is_floating_point or dtype.is_complex):
        lo, hi = {"positive": (1, 9), "shift": (0, 7), "small": (0, 4)}.get(domain, (-9, 10))
        if dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
            lo = max(lo, 0)
        return torch.randint(lo, hi, shape, generator=g).to(dtype)
    base = torch.float64 if dtype != torch.complex64 else torch.float32
    if dtype.is_complex:
        return torch.complex(
            torch.randn(shape, generator=g, dtype=base), torch.randn(shape, generator=g, dtype=base)
        ).to(dtype)
    u = torch.rand(shape, generator=g, dtype=torch.float64)
    x = {
        "real": (u - 0.5) * 6,
        "positive": u * 4 + 0.1,
        "unit": (u - 0.5) * 1.9,
        "above1": 1 + u * 3,
        "prob": u * 0.98 + 0.01,
        "int_valued": torch.floor(u * 5),
        "zeta_x": 1.5 + u * 3,
        "small": torch.floor(u * 4),
        "shift": torch.floor(u * 4),
    }[domain]
    return x.to(dtype)


FLOAT_DTYPES = (torch.float32, torch.float64, torch.bfloat16)
INT_DTYPES = (torch.int32, torch.int64, torch.uint8)
COMPLEX_DTYPES = (torch.complex64,)


def dtypes_of(dtype_class: str, *, low_precision: bool = True, complex_: bool = False):
    allowed = DTYPE_CLASSES[dtype_class]
    picks = [d for d in (*FLOAT_DTYPES, *INT_DTYPES, torch.bool) if d in allowed]
    if not low_precision:
        picks = [d for d in picks if d != torch.bfloat16]
    if complex_:
        picks += [d for d in COMPLEX_DTYPES if d in allowed]
    return picks


# ---- elementwise ---------------------------------------------------------------------------

UNARY_DOMAIN = {
    **dict.fromkeys(
        [
            "sqrt",
            "rsqrt",
            "log",
            "log2",
            "log10",
            "lgamma",
            "digamma",
            "reciprocal",
            "polygamma",
            "i0",
            "i0e",
            "i1",
            "i1e",
            "bessel_y0",
            "bessel_y1",
            "modified_bessel_k0",
            "modified_bessel_k1",
            "scaled_modified_bessel_k0",
            "scaled_modified_bessel_k1",
        ],
        "positive",
    ),
    **dict.fromkeys(["asin", "acos", "atanh", "erfinv"], "unit"),
    "acosh": "above1",
    "log1p": "positive",
    "ndtri": "prob",
}
# Special functions that CPU eager only implements for float32/float64.
_NO_BF16 = {"erfcx", "ndtri", "log_ndtr", "i1", "i1e", "i0e", "cbrt"} | {
    n for n in UNARY if "bessel" in n or n == "airy_ai"
}


def _unary_oracle(name: str):
    if name == "cbrt":
        return lambda a: torch.from_numpy(np.asarray(np.cbrt(a.numpy())))
    return None


def _unary_samples(name: str) -> list[Sample]:
    spec = UNARY[name]
    domain = UNARY_DOMAIN.get(name, "real")
    out = []
    for dtype in dtypes_of(spec.dtype_class, complex_=True):
        if dtype == torch.bfloat16 and name in _NO_BF16:
            continue
        if dtype.is_complex and domain != "real":
            continue
        tol = {"atol": 1e-2, "rtol": 1e-2} if dtype == torch.bfloat16 else {}
        out.append(Sample((make((3, 5), dtype, domain),), oracle=_unary_oracle(name), **tol))
    x = make(
        (2, 3, 4, 5),
        torch.float32 if torch.float32 in DTYPE_CLASSES[spec.dtype_class] else torch.int64,
        domain,
    ).to(memory_format=torch.channels_last)
    out.append(Sample((x,), oracle=_unary_oracle(name)))
    out.append(Sample((make((), out[0].args[0].dtype, domain),), oracle=_unary_oracle(name)))
    return out


for _n in UNARY:
    samples_for(_n)(_unary_samples)


@samples_for("round_decimals")
def _round_decimals(name):
    return [Sample((make((4, 3), d), 2)) for d in (torch.float32, torch.float64)]


@samples_for("polygamma")
def _polygamma(name):
    return [
        Sample((make((4, 3), d, "positive"), n))
        for d in (torch.float32, torch.float64)
        for n in (0, 1, 3)
    ]


BINARY_DOMAINS = {
    "div": ("real", "positive"),
    "floor_divide": ("real", "positive"),
    "remainder": ("real", "positive"),
    "fmod": ("real", "positive"),
    "pow": ("positive", "small"),
    "igamma": ("positive", "positive"),
    "igammac": ("positive", "positive"),
    "zeta": ("zeta_x", "positive"),
    "gcd": ("real", "real"),
    "lcm": ("real", "real"),
    "shift_left": ("real", "shift"),
    "shift_right_arithmetic": ("real", "shift"),
    "shift_right_logical": ("real", "shift"),
    "xlog1py": ("real", "positive"),
    "xlogy": ("real", "positive"),
}
_POLY = {n for n in BINARY if "polynomial" in n}


def _shift_right_logical_oracle(a, b):
    bits = torch.iinfo(a.dtype).bits
    unsigned = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
    an = np.broadcast_to(a.numpy(), np.broadcast_shapes(a.shape, b.shape)).astype(unsigned)
    bn = np.broadcast_to(b.numpy(), an.shape).astype(unsigned)
    return torch.from_numpy((an >> bn).astype(a.numpy().dtype))


def _binary_samples(name: str) -> list[Sample]:
    spec = BINARY.get(name) or COMPARISON[name]
    da, db = BINARY_DOMAINS.get(name, ("real", "real"))
    if name in _POLY:
        da, db = "real", "int_valued"
    oracle = _shift_right_logical_oracle if name == "shift_right_logical" else None
    out = []
    for dtype in dtypes_of(spec.dtype_class, complex_=name in ("add", "mul", "sub", "eq", "ne")):
        if dtype == torch.bfloat16 and (
            name in _POLY or name in ("zeta", "igamma", "igammac", "nextafter")
        ):
            continue
        a, b = make((3, 4), dtype, da), make((3, 4), dtype, db, seed=1)
        tol = {"atol": 1e-2, "rtol": 1e-2} if dtype == torch.bfloat16 else {}
        out.append(Sample((a, b), oracle=oracle, **tol))
    dtype = out[0].args[0].dtype
    # broadcasting, a 0-dim operand, and a channels_last pair
    out.append(Sample((make((3, 1), dtype, da), make((1, 4), dtype, db, seed=1)), oracle=oracle))
    out.append(Sample((make((2, 3), dtype, da), make((), dtype, db, seed=1)), oracle=oracle))
    cl = [
        make((2, 3, 2, 2), dtype, d, seed=s).to(memory_format=torch.channels_last)
        for d, s in ((da, 0), (db, 1))
    ]
    out.append(Sample(tuple(cl), oracle=oracle))
    return out


for _n in [*BINARY, *COMPARISON]:
    samples_for(_n)(_binary_samples)


@samples_for("where")
def _where(name):
    pred = make((3, 4), torch.bool)
    return [
        Sample((pred, make((3, 4), d), make((1, 4), d, seed=2)))
        for d in (torch.float32, torch.int64, torch.bool)
    ] + [Sample((make((3, 1), torch.bool), make((), torch.float64), make((4,), torch.float64)))]


@samples_for("fma")
def _fma(name):
    return [
        Sample(
            (make((3, 4), d), make((3, 4), d, seed=1), make((4,), d, seed=2)), atol=1e-6, rtol=1e-6
        )
        for d in (torch.float32, torch.float64)
    ]


# ---- conversion and creation ---------------------------------------------------------------


@samples_for("convert_element_type")
def _convert(name):
    x = make((2, 3, 4, 5), torch.float32).to(memory_format=torch.channels_last)
    return [
        Sample((make((3, 4), torch.float32), torch.int32)),
        Sample((make((3, 4), torch.int64), torch.float64)),
        Sample((make((3, 4), torch.float32), torch.bool)),
        Sample((make((3, 4), torch.float32), torch.float32)),
        Sample((x, torch.bfloat16)),
        Sample((make((4, 3), torch.float64).t(), torch.float32)),
    ]


@samples_for("device_put")
def _device_put(name):
    return [
        Sample((make((3, 4), torch.float32), torch.device("cpu"))),
        Sample((make((4, 3), torch.int64).t(), torch.device("cpu"))),
    ]


@samples_for("view_element_type")
def _view_element_type(name):
    return [
        Sample((make((3, 4), torch.float32), torch.int32)),
        Sample((make((3, 4), torch.float32), torch.bfloat16)),
        Sample((make((3, 4), torch.int16), torch.int32)),
        Sample((make((3, 4), torch.float64), torch.float64)),
    ]


_CPU = {"device": torch.device("cpu")}


@samples_for("full")
def _full(name):
    return [
        Sample(([2, 3], 1.5), {"dtype": torch.float32, **_CPU}),
        Sample(([4], 7), {"dtype": torch.int64, **_CPU}),
        Sample(([], True), {"dtype": torch.bool, **_CPU}),
    ]


@samples_for("empty_strided")
def _empty_strided(name):
    return [Sample(([2, 3], [1, 2]), {"dtype": torch.float32, **_CPU}, values=False)]


@samples_for("empty_permuted")
def _empty_permuted(name):
    return [Sample(([2, 3, 4], [0, 2, 1]), {"dtype": torch.float32, **_CPU}, values=False)]


@samples_for("iota")
def _iota(name):
    return [
        Sample((5,), {"start": 2, "step": 3, "dtype": torch.int64, **_CPU}),
        Sample((4,), {"start": 0, "step": -2, "dtype": torch.float32, **_CPU}),
        Sample((0,), {"start": 0, "step": 1, "dtype": torch.int32, **_CPU}),
    ]


@samples_for("scalar_tensor")
def _scalar_tensor(name):
    return [
        Sample((2.5,), {"dtype": torch.float64, **_CPU}),
        Sample((3,), {"dtype": torch.int32, **_CPU}),
    ]


# ---- reductions and scans ------------------------------------------------------------------


def _red_dtypes(name: str):
    return {
        "sum": (torch.float32, torch.int32),
        "prod": (torch.float64, torch.int64),
        "amax": (torch.float32, torch.int64, torch.bool),
        "amin": (torch.float64, torch.int32),
        "any": (torch.float32, torch.bool),
        "all": (torch.int64, torch.bool),
        "xor_sum": (torch.int64, torch.uint8),
    }[name]


def _xor_oracle(a, dims):
    return (
        torch.from_numpy(np.asarray(np.bitwise_xor.reduce(a.numpy(), axis=tuple(dims))))
        if dims
        else a
    )


@samples_for("sum", "prod", "amax", "amin", "any", "all", "xor_sum")
def _reductions(name):
    oracle = _xor_oracle if name == "xor_sum" else None
    out = []
    for d in _red_dtypes(name):
        domain = "small" if name == "prod" and not d.is_floating_point else "real"
        x = make((3, 4, 5), d, domain)
        out += [
            Sample((x, [1]), oracle=oracle),
            Sample((x, [0, 2]), oracle=oracle),
            Sample((x, []), oracle=oracle),
            Sample((x, [-1, 0, 1]), oracle=oracle),
        ]
    out.append(Sample((make((4, 3), _red_dtypes(name)[0]).t(), [0]), oracle=oracle))
    return out


@samples_for("argmax", "argmin")
def _argreductions(name):
    return [Sample((make((3, 4), d), dim)) for d in (torch.float32, torch.int64) for dim in (0, 1)]


@samples_for("var", "var_mean")
def _var(name):
    return [
        Sample((make((3, 4, 5), d), dims, c))
        for d in (torch.float32, torch.float64)
        for dims, c in (([1], 1.0), ([0, 2], 0.0), ([], 0.0))
    ] + [Sample((make((3, 4), torch.complex64), [0], 1.0), atol=1e-5, rtol=1e-5)]


@samples_for("cumsum", "cumprod", "logcumsumexp", "cummax", "cummin")
def _scans(name):
    dtypes = (
        (torch.float32, torch.float64) if name == "logcumsumexp" else (torch.float32, torch.int64)
    )
    domain = "unit" if name == "cumprod" else "real"
    return [Sample((make((3, 4), d, domain), dim)) for d in dtypes for dim in (0, -1)] + [
        Sample((make((4, 3), torch.float32, domain).t(), 1))
    ]


@samples_for("sort")
def _sort(name):
    return [
        Sample((make((3, 5), d), dim, desc, True))
        for d in (torch.float32, torch.int32)
        for dim in (0, 1)
        for desc in (False, True)
    ]


@samples_for("topk")
def _topk(name):
    return [
        Sample((make((3, 5), d), k, 1, largest))
        for d in (torch.float32, torch.int64)
        for k in (0, 2)
        for largest in (True, False)
    ]


@samples_for("kthvalue")
def _kthvalue(name):
    return [Sample((make((3, 5), torch.float64), 2, 1)), Sample((make((4, 3), torch.int32), 1, 0))]


# ---- views ---------------------------------------------------------------------------------

F32 = torch.float32


@samples_for("broadcast_in_dim")
def _broadcast_in_dim(name):
    return [
        Sample(
            (make((3, 1), F32), [2, 3, 4], [1, 2]),
            oracle=lambda a, s, b: a.reshape(1, 3, 1).expand(s),
        ),
        Sample((make((4,), F32), [4, 2], [0]), oracle=lambda a, s, b: a.reshape(4, 1).expand(s)),
        Sample((make((), F32), [2], []), oracle=lambda a, s, b: a.expand(s)),
    ]


@samples_for("squeeze")
def _squeeze(name):
    return [
        Sample((make((3, 1, 4, 1), F32), [1, 3])),
        Sample((make((1,), F32), [0])),
        Sample((make((3, 1), F32), [-1])),
        Sample((make((2, 3), F32), [])),
    ]


@samples_for("expand_dims")
def _expand_dims(name):
    return [
        Sample((make((3, 4), F32), [0, 3])),
        Sample((make((), F32), [0])),
        Sample((make((4, 3), F32).t(), [-1])),
    ]


@samples_for("permute")
def _permute(name):
    return [Sample((make((2, 3, 4), F32), [2, 0, 1])), Sample((make((2, 3), F32), [1, 0]))]


@samples_for("slice")
def _slice(name):
    return [
        Sample((make((5, 6), F32), [1, 0], [4, 6], [2, 3])),
        Sample((make((5, 6), F32), [0, 2], [5, 2])),
        Sample((make((6, 5), F32).t(), [1, 1], [3, 6], [1, 2])),
    ]


@samples_for("as_strided")
def _as_strided(name):
    return [
        Sample((make((4, 5), F32), [3, 2], [2, 5], 1)),
        Sample((make((6,), F32), [2, 2], [1, 1], 0)),
    ]


@samples_for("split_dim")
def _split_dim(name):
    return [Sample((make((6, 4), F32), 0, 2)), Sample((make((4, 6), F32).t(), -1, 4))]


@samples_for("collapse_view")
def _collapse_view(name):
    return [
        Sample((make((2, 3, 4), F32), 0, 2)),
        Sample((make((2, 3, 4), F32), 1, 3)),
        Sample((make((2, 3, 4), F32), 0, 3)),
        Sample((make((2, 3), F32), 1, 2)),
    ]


@samples_for("view_of")
def _view_of(name):
    return [Sample((make((2, 3), F32),))]


@samples_for("unfold")
def _unfold(name):
    return [Sample((make((3, 8), F32), 1, 3, 2)), Sample((make((5,), F32), 0, 5, 1))]


@samples_for("diagonal")
def _diagonal(name):
    return [Sample((make((4, 5), F32), 0, 0, 1)), Sample((make((2, 4, 5), F32), -1, 2, 1))]


@samples_for("real", "imag", "view_as_real")
def _complex_views(name):
    return [Sample((make((3, 4), torch.complex64),)), Sample((make((3,), torch.complex128),))]


@samples_for("view_as_complex")
def _view_as_complex(name):
    return [Sample((make((3, 2), F32),)), Sample((make((2, 3, 2), torch.float64),))]


# ---- shape ---------------------------------------------------------------------------------


@samples_for("reshape")
def _reshape(name):
    return [
        Sample((make((2, 6), F32), [3, 4])),
        Sample((make((4, 3), F32).t(), [12])),
        Sample((make((), torch.int64), [1, 1])),
    ]


@samples_for("collapse")
def _collapse(name):
    return [Sample((make((2, 3, 4), F32), 0, 2)), Sample((make((4, 3), F32).t(), 0, 2))]


@samples_for("rev")
def _rev(name):
    return [
        Sample((make((3, 4), F32), [0])),
        Sample((make((3, 4), torch.int32), [0, 1])),
        Sample((make((3, 4), F32), []), oracle=lambda a, d: a),
    ]


@samples_for("roll")
def _roll(name):
    return [
        Sample((make((3, 4), F32), [1], [0])),
        Sample((make((2, 5, 4), torch.int32), [3, 1], [1, 2])),
        Sample((make((3, 4), F32), [], []), oracle=lambda a, s, d: a),
    ]


@samples_for("cat")
def _cat(name):
    return [
        Sample(([make((2, 3), F32), make((4, 3), F32, seed=1)], 0)),
        Sample(([make((2, 3), torch.int64), make((2, 1), torch.int64, seed=1)], -1)),
    ]


def _pad_oracle(a, value, low, high, interior):
    # Zero interior only: torch.nn.functional.pad takes (last dim low, high, ...).
    flat = [v for lo, hi in zip(reversed(low), reversed(high), strict=False) for v in (lo, hi)]
    return torch.nn.functional.pad(a, flat, value=value)


@samples_for("pad")
def _pad(name):
    x = make((3, 4), F32)
    expected_interior = torch.tensor([0.0, 1, 0, 2, 0, 3, 0], dtype=F32)
    return [
        Sample((x, 0.5, [1, 0], [2, 1], [0, 0]), oracle=_pad_oracle),
        Sample((x, -1.0, [-1, 2], [1, -2], [0, 0]), oracle=_pad_oracle),
        Sample(
            (torch.tensor([1.0, 2, 3]), 0.0, [0], [0], [1]),
            oracle=lambda *a: expected_interior[1:6],
        ),
        Sample(
            (torch.tensor([1.0, 2, 3]), 0.0, [1], [1], [1]), oracle=lambda *a: expected_interior
        ),
        Sample(
            (torch.tensor([1.0, 2, 3]), 0.0, [-1], [0], [1]),
            oracle=lambda *a: expected_interior[2:6],
        ),
    ]


@samples_for("clone")
def _clone(name):
    x = make((2, 3, 4, 5), F32)
    return [
        Sample((x,)),
        Sample((x.to(memory_format=torch.channels_last),)),
        Sample((x,), {"memory_format": torch.channels_last}),
        Sample((make((4, 3), F32).t(),), {"memory_format": torch.contiguous_format}),
    ]


@samples_for("copy_strided")
def _copy_strided(name):
    return [Sample((make((3, 4), F32), [1, 3])), Sample((make((3, 4), torch.int64), [8, 2]))]


@samples_for("as_strided_scatter")
def _as_strided_scatter(name):
    return [
        Sample((make((4, 5), F32), make((2, 2), F32, seed=1), [2, 2], [5, 1], 6)),
        Sample((make((5, 4), F32).t(), make((3,), F32, seed=1), [3], [6], 1)),
    ]


@samples_for("slice_scatter")
def _slice_scatter(name):
    return [
        Sample((make((5, 4), F32), make((2, 4), F32, seed=1), 0, 1, 5, 2)),
        Sample((make((3, 6), torch.int64), make((3, 3), torch.int64, seed=1), 1, 0, 3, 1)),
    ]


@samples_for("diagonal_scatter")
def _diagonal_scatter(name):
    return [
        Sample((make((4, 5), F32), make((4,), F32, seed=1), 0, 0, 1)),
        Sample((make((4, 5), F32), make((3,), F32, seed=1), 2, 0, 1)),
    ]


# ---- random (values are checked in test_random.py) -----------------------------------------

_SEED = torch.tensor(1234, dtype=torch.int64)


@samples_for("random_bits")
def _random_bits(name):
    return [Sample(([3, 4], _SEED, 0), _CPU, values=False)]


@samples_for("uniform", "normal")
def _uniform(name):
    return [
        Sample(([3, 4], _SEED, 5), {"dtype": d, **_CPU}, values=False)
        for d in (torch.float32, torch.float64, torch.bfloat16, torch.float16)
    ]


@samples_for("next_seed")
def _next_seed(name):
    return [Sample((torch.device("cpu"),), values=False)]


# ---- indexing ------------------------------------------------------------------------------


def _idx(shape, high, seed=3):
    return torch.randint(0, high, shape, generator=_gen(seed))


@samples_for("gather")
def _gather(name):
    return [
        Sample((make((3, 4), F32), 0, _idx((2, 4), 3))),
        Sample((make((3, 4), torch.int64), 1, _idx((3, 6), 4))),
    ]


@samples_for("scatter", "scatter_add")
def _scatter(name):
    # scatter: distinct indices per column so the result is deterministic
    index = torch.stack([torch.randperm(4, generator=_gen(i))[:2] for i in range(3)], 1)
    return [
        Sample((make((4, 3), F32), 0, index, make((2, 3), F32, seed=1))),
        Sample(
            (
                make((3, 5), torch.int64),
                1,
                _idx((3, 2), 5)
                if name == "scatter_add"
                else torch.tensor([[0, 4], [1, 2], [3, 0]]),
                make((3, 2), torch.int64, seed=1),
            )
        ),
    ]


@samples_for("scatter_reduce")
def _scatter_reduce(name):
    return [
        Sample((make((4, 3), F32), 0, _idx((5, 3), 4), make((5, 3), F32, seed=1), r, inc))
        for r in ("sum", "prod", "mean", "amax", "amin")
        for inc in (True, False)
    ]


@samples_for("index_select")
def _index_select(name):
    return [
        Sample((make((4, 3), F32), 0, _idx((5,), 4))),
        Sample((make((4, 3), torch.int32), 1, torch.tensor(2))),
    ]


@samples_for("index")
def _index(name):
    x = make((4, 5, 6), F32)
    return [
        Sample((x, [_idx((3,), 4)])),
        Sample((x, [None, _idx((2, 3), 5)])),
        Sample((x, [_idx((3,), 4), None, _idx((3,), 6, seed=4)])),
    ]


@samples_for("index_put")
def _index_put(name):
    x = make((4, 5), F32)
    return [
        Sample((x, [torch.tensor([0, 2])], make((2, 5), F32, seed=1), False)),
        Sample((x, [_idx((6,), 4), _idx((6,), 5, seed=4)], make((6,), F32, seed=1), True)),
        Sample((x, [None, torch.tensor([1, 3])], make((), F32, seed=1), False)),
    ]


@samples_for("index_add", "index_copy")
def _index_update(name):
    index = torch.tensor([3, 0]) if name == "index_copy" else torch.tensor([3, 0, 3])
    return [
        Sample((make((4, 3), F32), 0, index, make((len(index), 3), F32, seed=1))),
        Sample((make((3, 4), torch.int64), 1, index, make((3, len(index)), torch.int64, seed=1))),
    ]


@samples_for("searchsorted")
def _searchsorted(name):
    seq = torch.sort(make((7,), F32)).values
    seq2 = torch.sort(make((2, 6), torch.int64), dim=-1).values
    return [Sample((seq, make((3, 4), F32, seed=1), right)) for right in (False, True)] + [
        Sample((seq2, make((2, 3), torch.int64, seed=1), False))
    ]


# ---- extern --------------------------------------------------------------------------------


@samples_for("mm")
def _mm(name):
    return [
        Sample((make((3, 4), d), make((4, 5), d, seed=1)), atol=1e-5, rtol=1e-5)
        for d in (torch.float32, torch.float64, torch.int64)
    ] + [Sample((make((4, 3), F32).t(), make((4, 2), F32, seed=1)), atol=1e-5, rtol=1e-5)]


@samples_for("bmm")
def _bmm(name):
    return [
        Sample((make((2, 3, 4), d), make((2, 4, 5), d, seed=1)), atol=1e-5, rtol=1e-5)
        for d in (torch.float32, torch.float64)
    ]


@samples_for("addmm")
def _addmm(name):
    return [
        Sample(
            (make(bs, F32, seed=2), make((3, 4), F32), make((4, 5), F32, seed=1)),
            atol=1e-5,
            rtol=1e-5,
        )
        for bs in ((5,), (3, 5), (3, 1))
    ]


def _conv_args(transposed=False, groups=1):
    x = make((2, 4, 7, 6), F32)
    w = (
        make((4, 4 // groups, 3, 3), F32, seed=1)
        if not transposed
        else make((4, 2 // groups * 1, 3, 3), F32, seed=1)
    )
    return x, w


@samples_for("convolution")
def _convolution(name):
    x, w = _conv_args()
    b = make((4,), F32, seed=2)
    xt, wt = _conv_args(transposed=True)
    x1 = make((2, 3, 9), torch.float64)
    w1 = make((6, 1, 2), torch.float64, seed=1)
    tol = {"atol": 1e-4, "rtol": 1e-4}
    return [
        Sample((x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), **tol),
        Sample((x, w[:, :2].contiguous(), None, [2, 1], [0, 1], [1, 2], False, [0, 0], 2), **tol),
        Sample((xt, wt, None, [2, 2], [1, 1], [1, 1], True, [1, 0], 1), **tol),
        Sample((x1, w1, None, [1], [1], [1], False, [0], 3), **tol),
        Sample(
            (
                x.to(memory_format=torch.channels_last),
                w,
                b,
                [1, 1],
                [0, 0],
                [1, 1],
                False,
                [0, 0],
                1,
            ),
            **tol,
        ),
    ]


@samples_for("convolution_backward")
def _convolution_backward(name):
    x, w = _conv_args()
    go = make((2, 4, 7, 6), F32, seed=5)
    tol = {"atol": 1e-4, "rtol": 1e-4}
    return [
        Sample(
            (go, x, w, [4], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]), **tol
        ),
        Sample(
            (go, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, False, False]), **tol
        ),
    ]


@samples_for("scaled_dot_product_attention")
def _sdpa(name):
    q, k, v = (
        make((2, 3, 5, 4), F32),
        make((2, 3, 6, 4), F32, seed=1),
        make((2, 3, 6, 8), F32, seed=2),
    )
    mask = make((5, 6), torch.bool)
    mask[:, 0] = True
    tol = {"atol": 1e-5, "rtol": 1e-5}
    return [
        Sample((q, k, v, None, False, None), **tol),
        Sample((q, k, v, mask, False, 0.3), **tol),
        Sample((q, k[:, :, :5], v[:, :, :5], None, True, None), **tol),
    ]


def _attention_inputs(device: str, dtype: torch.dtype, kv_heads: int = 3):
    q = make((2, 3, 5, 8), dtype).to(device)
    k = make((2, 5, kv_heads, 8), dtype, seed=1).to(device).transpose(1, 2)  # HF's layout
    v = make((2, kv_heads, 5, 8), dtype, seed=2).to(device)
    return q, k, v


def _attention_oracle(q, k, v, mask, is_causal, scale):
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=True
    )
    return out


@samples_for("sdpa_flash_cpu")
def _sdpa_flash_cpu(name):
    q, k, v = _attention_inputs("cpu", F32)
    mask = make((1, 1, 5, 5), F32, seed=3)
    tol = {"atol": 1e-5, "rtol": 1e-5}

    def oracle(*args):  # logsumexp is the kernel's own: compared in test_attention.py
        return _attention_oracle(*args), op(*args)[1]

    op = torch.ops.ember_prims.sdpa_flash_cpu
    return [
        Sample((q, k, v, None, True, None), oracle=oracle, **tol),
        Sample((q, k, v, mask, False, 0.3), oracle=oracle, **tol),
        Sample((q, k[:, :1], v[:, :1], None, False, None), oracle=oracle, **tol),  # GQA
    ]


@samples_for("sdpa_flash_cpu_backward")
def _sdpa_flash_cpu_backward(name):
    aten = torch.ops.aten
    q, k, v = _attention_inputs("cpu", F32)
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)
    g = make(tuple(out.shape), F32, seed=4)

    def oracle(g, q, k, v, out, lse, mask, is_causal, scale):
        return aten._scaled_dot_product_flash_attention_for_cpu_backward(
            g, q, k, v, out, lse, 0.0, is_causal, attn_mask=mask, scale=scale
        )

    return [Sample((g, q, k, v, out, lse, None, True, None), oracle=oracle)]


@samples_for("sdpa_flash_cuda", "sdpa_efficient")
def _sdpa_cuda(name):
    if not torch.cuda.is_available():
        return [Sample((), cuda=True)]
    q, k, v = _attention_inputs("cuda", torch.float16, kv_heads=3)
    if name == "sdpa_flash_cuda":
        return [Sample((q, k, v, 0.0, True, None), values=False, cuda=True)]
    return [Sample((q, k, v, None, True, 0.0, True, None), values=False, cuda=True)]


@samples_for("sdpa_flash_cuda_backward", "sdpa_efficient_backward")
def _sdpa_cuda_backward(name):
    if not torch.cuda.is_available():
        return [Sample((), cuda=True)]
    q, k, v = _attention_inputs("cuda", torch.float16, kv_heads=3)
    g = torch.ones_like(q)
    if name == "sdpa_flash_cuda_backward":
        out, lse, rng, unused = torch.ops.ember_prims.sdpa_flash_cuda(q, k, v, 0.0, True, None)
        return [
            Sample((g, q, k, v, out, lse, 0.0, True, rng, unused, None), values=False, cuda=True)
        ]
    out, lse, seed, offset = torch.ops.ember_prims.sdpa_efficient(
        q, k, v, None, True, 0.0, True, None
    )
    args = (g, q, k, v, None, out, lse, seed, offset, 0.0, [True, True, True, False], True, None)
    return [Sample(args, values=False, cuda=True)]


@samples_for("fft_r2c")
def _fft_r2c(name):
    return [
        Sample((make((4, 6), F32), [1], True), atol=1e-5, rtol=1e-5),
        Sample((make((4, 6), torch.float64), [0, 1], False)),
    ]


@samples_for("fft_c2c")
def _fft_c2c(name):
    return [
        Sample((make((4, 6), torch.complex64), [1], fw), atol=1e-4, rtol=1e-4)
        for fw in (True, False)
    ]


@samples_for("fft_c2r")
def _fft_c2r(name):
    spectrum = torch.fft.rfftn(make((4, 6), torch.float64), dim=[0, 1])
    return [Sample((spectrum, [0, 1], 6)), Sample((spectrum[:, :3].contiguous(), [1], 5))]


def _spd(n=4, batch=(), dtype=torch.float64, seed=0):
    a = make((*batch, n, n), dtype, seed=seed)
    return a @ a.mT + n * torch.eye(n, dtype=dtype)


def _linalg_samples(name: str) -> list[Sample]:
    d64 = torch.float64
    a, b, spd = make((4, 4), d64), make((4, 2), d64, seed=1), _spd()
    lo = torch.linalg.cholesky(spd)
    lu, piv = torch.linalg.lu_factor(spd)
    ld, ldpiv = torch.linalg.ldl_factor(spd)
    geqrf = torch.geqrf(make((5, 3), d64))
    tri = torch.triu(a) + 4 * torch.eye(4, dtype=d64)
    table = {
        "cholesky": [(spd, False), (_spd(3, (2,)), True)],
        "cholesky_solve": [(b, lo, False)],
        "cholesky_inverse": [(lo, False)],
        "lu_factor": [(a, True), (make((2, 3, 3), d64), True)],
        "lu": [(a, True), (make((3, 5), d64), True)],
        "lu_solve": [(lu, piv, b, True, False), (lu, piv, b.mT.contiguous(), False, True)],
        "triangular_solve": [(tri, b, True, True, False), (tri.mT, b.mT, False, False, True)],
        "qr": [(make((5, 3), d64), m) for m in ("reduced", "complete", "r")],
        "householder_product": [tuple(geqrf)],
        "geqrf": [(make((5, 3), d64),)],
        "ormqr": [(*geqrf, make((5, 2), d64, seed=2), True, False)],
        "eigh": [(spd, "L"), (spd, "U")],
        "eig": [(spd,)],
        "svd": [(make((4, 3), d64), False), (make((3, 4), d64), True)],
        "inverse": [(spd,)],
        "solve": [(spd, b, True), (spd, b.mT.contiguous(), False)],
        "det": [(a,), (make((2, 3, 3), torch.float32),)],
        "slogdet": [(a,)],
        "ldl_factor": [(spd, False)],
        "ldl_solve": [(ld, ldpiv, b, False)],
        "matrix_exp": [(a / 4,)],
    }
    # The reference runs the same LAPACK kernel as eager, so even sign-ambiguous factors agree.
    return [Sample(args, atol=1e-8, rtol=1e-6) for args in table[name]]


for _n in LINALG:
    samples_for(f"linalg_{_n}")(lambda name: _linalg_samples(name.removeprefix("linalg_")))


def every_prim_name() -> Iterator[str]:
    return (p.name for p in all_prims())
