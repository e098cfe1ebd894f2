"""LAPACK-style extern prims (``linalg_<kernel>``), table-driven.

Kernels that can fail on singular/non-positive-definite input return ``info`` (int32) like aten's
``*_ex`` variants, so a decomposition can decide how to report the failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from ._extern_base import check_matrices, define_extern
from ._registry import fail

aten = torch.ops.aten


class Kernel(NamedTuple):
    schema: str  # after the name
    kernel: Callable
    matrices: int  # how many leading tensor arguments are (batches of) matrices
    square: tuple[int, ...]
    notes: str
    meta_kernel: Callable | None = None  # for aten kernels without a meta function


def _geqrf_meta(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = a.shape[-2:]
    return torch.empty_like(a), a.new_empty((*a.shape[:-2], min(m, n)))


def _check_choice(p: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        fail(p, f"got {value!r}, expected one of {choices}")


LINALG: dict[str, Kernel] = {
    "cholesky": Kernel(
        "(Tensor a, bool upper) -> (Tensor, Tensor)",
        lambda a, upper: aten.linalg_cholesky_ex(a, upper=upper),
        1,
        (0,),
        "(L, info): a = L L^H (or U^H U)",
    ),
    "cholesky_solve": Kernel(
        "(Tensor b, Tensor l, bool upper) -> Tensor",
        lambda b, factor, upper: aten.cholesky_solve(b, factor, upper),
        2,
        (1,),
        "solves A X = b given A's Cholesky factor",
    ),
    "cholesky_inverse": Kernel(
        "(Tensor l, bool upper) -> Tensor",
        lambda factor, upper: aten.cholesky_inverse(factor, upper),
        1,
        (0,),
        "A^-1 from A's Cholesky factor",
    ),
    "lu_factor": Kernel(
        "(Tensor a, bool pivot) -> (Tensor, Tensor, Tensor)",
        lambda a, pivot: aten.linalg_lu_factor_ex(a, pivot=pivot),
        1,
        (),
        "(LU, pivots, info), packed LAPACK getrf",
    ),
    "lu": Kernel(
        "(Tensor a, bool pivot) -> (Tensor, Tensor, Tensor)",
        lambda a, pivot: aten.linalg_lu(a, pivot=pivot),
        1,
        (),
        "(P, L, U) with a = P L U",
    ),
    "lu_solve": Kernel(
        "(Tensor lu, Tensor pivots, Tensor b, bool left, bool adjoint) -> Tensor",
        lambda lu, piv, b, left, adjoint: aten.linalg_lu_solve(
            lu, piv, b, left=left, adjoint=adjoint
        ),
        1,
        (0,),
        "solves with a packed LU factorization",
    ),
    "triangular_solve": Kernel(
        "(Tensor a, Tensor b, bool upper, bool left, bool unitriangular) -> Tensor",
        lambda a, b, upper, left, unit: aten.linalg_solve_triangular(
            a, b, upper=upper, left=left, unitriangular=unit
        ),
        2,
        (0,),
        "solves A X = B (left) or X A = B with triangular A",
    ),
    "qr": Kernel(
        "(Tensor a, str mode) -> (Tensor, Tensor)",
        lambda a, mode: aten.linalg_qr(a, mode),
        1,
        (),
        "(Q, R); mode reduced, complete or r",
    ),
    "householder_product": Kernel(
        "(Tensor a, Tensor tau) -> Tensor",
        lambda a, tau: aten.linalg_householder_product(a, tau),
        1,
        (),
        "Q from Householder reflectors (LAPACK orgqr)",
    ),
    "geqrf": Kernel(
        "(Tensor a) -> (Tensor, Tensor)",
        lambda a: aten.geqrf(a),
        1,
        (),
        "(reflectors, tau), LAPACK geqrf",
        _geqrf_meta,
    ),
    "ormqr": Kernel(
        "(Tensor a, Tensor tau, Tensor c, bool left, bool transpose) -> Tensor",
        lambda a, tau, c, left, transpose: aten.ormqr(a, tau, c, left, transpose),
        1,
        (),
        "multiplies c by Q from geqrf (LAPACK ormqr)",
    ),
    "eigh": Kernel(
        "(Tensor a, str uplo) -> (Tensor, Tensor)",
        lambda a, uplo: aten.linalg_eigh(a, uplo),
        1,
        (0,),
        "(eigenvalues ascending, eigenvectors) of a Hermitian matrix",
    ),
    "eig": Kernel(
        "(Tensor a) -> (Tensor, Tensor)",
        lambda a: aten.linalg_eig(a),
        1,
        (0,),
        "complex (eigenvalues, eigenvectors); CPU/LAPACK geev",
    ),
    "svd": Kernel(
        "(Tensor a, bool full_matrices) -> (Tensor, Tensor, Tensor)",
        lambda a, full: aten.linalg_svd(a, full_matrices=full),
        1,
        (),
        "(U, S, Vh)",
    ),
    "inverse": Kernel(
        "(Tensor a) -> (Tensor, Tensor)",
        lambda a: aten.linalg_inv_ex(a),
        1,
        (0,),
        "(inverse, info)",
    ),
    "solve": Kernel(
        "(Tensor a, Tensor b, bool left) -> (Tensor, Tensor)",
        lambda a, b, left: aten.linalg_solve_ex(a, b, left=left),
        1,
        (0,),
        "(X, info) with A X = B (left) or X A = B",
    ),
    "det": Kernel("(Tensor a) -> Tensor", lambda a: aten.linalg_det(a), 1, (0,), "determinant"),
    "slogdet": Kernel(
        "(Tensor a) -> (Tensor, Tensor)",
        lambda a: aten.linalg_slogdet(a),
        1,
        (0,),
        "(sign, log|det|)",
    ),
    "ldl_factor": Kernel(
        "(Tensor a, bool hermitian) -> (Tensor, Tensor, Tensor)",
        lambda a, hermitian: aten.linalg_ldl_factor_ex(a, hermitian=hermitian),
        1,
        (0,),
        "(LD, pivots, info), LAPACK sytrf",
    ),
    "ldl_solve": Kernel(
        "(Tensor ld, Tensor pivots, Tensor b, bool hermitian) -> Tensor",
        lambda ld, piv, b, hermitian: aten.linalg_ldl_solve(ld, piv, b, hermitian=hermitian),
        1,
        (0,),
        "solves with an LDL factorization",
    ),
    "matrix_exp": Kernel(
        "(Tensor a) -> Tensor", lambda a: aten.linalg_matrix_exp(a), 1, (0,), "matrix exponential"
    ),
}

_CHOICES = {"qr": ("reduced", "complete", "r"), "eigh": ("L", "U")}


def _make_check(name: str, spec: Kernel) -> Callable:
    p = f"linalg_{name}"

    def check(*args, **kwargs):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        matrices = list(args[: spec.matrices])
        check_matrices(p, matrices, square=spec.square)
        # Right-hand sides share the matrices' dtype (pivots and tau are checked by aten).
        for extra in tensors[spec.matrices :]:
            inexact = extra.dtype.is_floating_point or extra.dtype.is_complex
            if inexact and extra.dtype != matrices[0].dtype:
                fail(
                    p,
                    f"tensor of dtype {extra.dtype} mixed with {matrices[0].dtype}",
                    dtype=True,
                )
        if name in _CHOICES:
            _check_choice(p, args[1], _CHOICES[name])

    return check


for _name, _spec in LINALG.items():
    define_extern(
        f"linalg_{_name}{_spec.schema}",
        _spec.kernel,
        _make_check(_name, _spec),
        notes=_spec.notes,
        meta_kernel=_spec.meta_kernel,
    )
