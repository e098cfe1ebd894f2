"""Linear algebra and FFT over the extern prims (linalg_<kernel>, fft_*), plus complex views.

Kernels that can fail report ``info`` like aten's ``*_ex`` ops; ``check_errors`` and
``_linalg_check_errors`` turn a nonzero info into the same RuntimeError as eager.
"""

from __future__ import annotations

import math

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import canonical_dim, scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.matmul import batched_matmul
from ember_primops.decompositions.type_promotion import convert

aten = torch.ops.aten


@register_decomposition(aten._linalg_check_errors.default)
def linalg_check_errors(info, api_name, *, is_matrix):
    if info.numel() and bool(prims.any(prims.ne(info, scalar(0, info)), list(range(info.dim())))):
        raise RuntimeError(
            f"{api_name}: The factorization could not be completed because the input is not "
            "invertible / positive-definite (info != 0)"
        )


def _checked(info, name, check_errors):
    if check_errors:
        linalg_check_errors(info, name, is_matrix=info.dim() == 0)


@register_decomposition(aten.linalg_cholesky_ex.default)
def linalg_cholesky_ex(a, *, upper=False, check_errors=False):
    factor, info = prims.linalg_cholesky(a, upper)
    _checked(info, "linalg.cholesky", check_errors)
    return factor, info


def cholesky(a, upper=False):
    factor, info = prims.linalg_cholesky(a, upper)
    _checked(info, "cholesky", True)
    return factor


# torch 2.14 removed the deprecated aten.cholesky (torch.cholesky goes through
# linalg_cholesky_ex there); where it still exists it decomposes as above
if hasattr(aten, "cholesky"):
    register_decomposition(aten.cholesky.default)(cholesky)


@register_decomposition(aten.cholesky_solve.default)
def cholesky_solve(b, factor, upper=False):
    return prims.linalg_cholesky_solve(b, factor, upper)


@register_decomposition(aten.cholesky_inverse.default)
def cholesky_inverse(factor, upper=False):
    return prims.linalg_cholesky_inverse(factor, upper)


@register_decomposition(aten.linalg_lu_factor_ex.default)
def linalg_lu_factor_ex(a, *, pivot=True, check_errors=False):
    lu, pivots, info = prims.linalg_lu_factor(a, pivot)
    _checked(info, "linalg.lu_factor", check_errors)
    return lu, pivots, info


@register_decomposition(aten.linalg_lu.default)
def linalg_lu(a, *, pivot=True):
    return prims.linalg_lu(a, pivot)


@register_decomposition(aten.linalg_lu_solve.default)
def linalg_lu_solve(lu, pivots, b, *, left=True, adjoint=False):
    return prims.linalg_lu_solve(lu, pivots, b, left, adjoint)


@register_decomposition(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(a, b, *, upper, left=True, unitriangular=False):
    return prims.linalg_triangular_solve(a, b, upper, left, unitriangular)


@register_decomposition(aten.triangular_solve.default)
def triangular_solve(b, a, upper=True, transpose=False, unitriangular=False):
    matrix = aten.transpose.int(a, -2, -1) if transpose else a
    x = prims.linalg_triangular_solve(matrix, b, upper != transpose, True, unitriangular)
    return x, prims.clone(a)


@register_decomposition(aten.linalg_qr.default)
def linalg_qr(a, mode="reduced"):
    return prims.linalg_qr(a, mode)


@register_decomposition(aten.linalg_householder_product.default)
def householder_product(a, tau):
    return prims.linalg_householder_product(a, tau)


@register_decomposition(aten.geqrf.default)
def geqrf(a):
    return prims.linalg_geqrf(a)


@register_decomposition(aten.ormqr.default)
def ormqr(a, tau, c, left=True, transpose=False):
    return prims.linalg_ormqr(a, tau, c, left, transpose)


def _empty(like, dtype=None):
    return prims.full([0], 0, dtype=dtype or like.dtype, device=like.device)


@register_decomposition(aten._linalg_eigh.default)
def linalg_eigh(a, UPLO="L", compute_v=True):
    values, vectors = prims.linalg_eigh(a, UPLO)
    return values, (vectors if compute_v else _empty(a))


@register_decomposition(aten.linalg_eig.default)
def linalg_eig(a):
    return prims.linalg_eig(a)


@register_decomposition(aten._linalg_svd.default)
def linalg_svd(a, full_matrices=False, compute_uv=True, *, driver=None):
    u, s, vh = prims.linalg_svd(a, full_matrices)
    if not compute_uv:
        return _empty(a), s, _empty(a)
    return u, s, vh


@register_decomposition(aten.linalg_inv_ex.default)
def linalg_inv_ex(a, *, check_errors=False):
    inverse, info = prims.linalg_inverse(a)
    _checked(info, "linalg.inv", check_errors)
    return inverse, info


@register_decomposition(aten._linalg_solve_ex.default)
def linalg_solve_ex(a, b, *, left=True, check_errors=False):
    lu, pivots, _ = prims.linalg_lu_factor(a, True)
    x, info = prims.linalg_solve(a, b, left)
    _checked(info, "linalg.solve", check_errors)
    return x, lu, pivots, info


def _lu_of_det(a):
    """The LU factorization aten's det and slogdet return: of A^T when A is contiguous and
    real (det(A^T) = det(A), and LAPACK wants column-major input), else of A. Their backward
    formulas solve with it and pick the adjoint flag by the same rule, so another LU gives
    wrong gradients."""
    if a.is_contiguous() and not a.is_complex():
        a = prims.permute(a, [*range(a.dim() - 2), a.dim() - 1, a.dim() - 2])
    lu, pivots, _ = prims.linalg_lu_factor(a, True)
    return lu, pivots


@register_decomposition(aten._linalg_det.default)
def linalg_det(a):
    lu, pivots = _lu_of_det(a)
    return prims.linalg_det(a), lu, pivots


@register_decomposition(aten._linalg_slogdet.default)
def linalg_slogdet(a):
    lu, pivots = _lu_of_det(a)
    sign, logabsdet = prims.linalg_slogdet(a)
    return sign, logabsdet, lu, pivots


@register_decomposition(aten.linalg_ldl_factor_ex.default)
def linalg_ldl_factor_ex(a, *, hermitian=False, check_errors=False):
    ld, pivots, info = prims.linalg_ldl_factor(a, hermitian)
    _checked(info, "linalg.ldl_factor", check_errors)
    return ld, pivots, info


@register_decomposition(aten.linalg_ldl_solve.default)
def linalg_ldl_solve(ld, pivots, b, *, hermitian=False):
    return prims.linalg_ldl_solve(ld, pivots, b, hermitian)


@register_decomposition(aten.linalg_matrix_exp.default)
def linalg_matrix_exp(a):
    return prims.linalg_matrix_exp(a)


@register_decomposition(aten.linalg_cross.default)
def linalg_cross(a, b, *, dim=-1):
    d = canonical_dim(dim, max(a.dim(), b.dim()))
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[d]} and "
            f"{b.shape[d]}"
        )
    first = prims.iota(3, start=1, step=1, dtype=torch.int64, device=a.device)
    first = prims.remainder(first, prims.scalar_tensor(3, dtype=torch.int64, device=a.device))
    second = prims.remainder(
        prims.iota(3, start=2, step=1, dtype=torch.int64, device=a.device),
        prims.scalar_tensor(3, dtype=torch.int64, device=a.device),
    )
    a1, a2 = prims.index_select(a, d, first), prims.index_select(a, d, second)
    b1, b2 = prims.index_select(b, d, first), prims.index_select(b, d, second)
    return prims.sub(prims.mul(a1, b2), prims.mul(a2, b1))


def _fft_scale(out, a_shape, dims, normalization, signal_sizes=None):
    n = math.prod(signal_sizes or [a_shape[d] for d in dims])
    if normalization == 0 or n == 0:
        return out
    factor = 1.0 / math.sqrt(n) if normalization == 1 else 1.0 / n
    return prims.mul(out, prims.scalar_tensor(factor, dtype=out.dtype, device=out.device))


@register_decomposition(aten._fft_r2c.default)
def fft_r2c(a, dim, normalization, onesided):
    dims = [canonical_dim(d, a.dim()) for d in dim]
    return _fft_scale(prims.fft_r2c(a, dims, onesided), a.shape, dims, normalization)


@register_decomposition(aten._fft_c2c.default)
def fft_c2c(a, dim, normalization, forward):
    dims = [canonical_dim(d, a.dim()) for d in dim]
    return _fft_scale(prims.fft_c2c(a, dims, forward), a.shape, dims, normalization)


@register_decomposition(aten._fft_c2r.default)
def fft_c2r(a, dim, normalization, last_dim_size):
    dims = [canonical_dim(d, a.dim()) for d in dim]
    out = prims.fft_c2r(a, dims, last_dim_size)
    return _fft_scale(out, out.shape, dims, normalization)


@register_decomposition(
    aten._conj.default,
    aten.conj_physical.default,
    aten._conj_physical.default,
    aten.resolve_conj.default,
)
def conj(a):
    return prims.conj_physical(a) if a.is_complex() else prims.view_of(a)


@register_decomposition(aten.view_as_real.default)
def view_as_real(a):
    return prims.view_as_real(a)


@register_decomposition(aten.view_as_complex.default)
def view_as_complex(a):
    return prims.view_as_complex(a)


@register_decomposition(aten.complex.default)
def complex_(real, imag):
    return prims.complex(real, imag)


@register_decomposition(aten.real.default)
def real(a):
    return prims.real(a) if a.is_complex() else prims.view_of(a)


@register_decomposition(aten.imag.default)
def imag(a):
    return prims.imag(a)


@register_decomposition(aten.linalg_pinv.atol_rtol_tensor)
def linalg_pinv(a, *, atol=None, rtol=None, hermitian=False):
    if hermitian:
        values, vectors = prims.linalg_eigh(a, "L")
        magnitude = prims.abs(values)
    else:
        u, values, vh = prims.linalg_svd(a, False)
        magnitude = values
    m, n = a.shape[-2], a.shape[-1]
    if magnitude.numel() == 0 or a.numel() == 0:
        return prims.full([*a.shape[:-2], n, m], 0, dtype=a.dtype, device=a.device)
    top = prims.expand_dims(prims.amax(magnitude, [magnitude.dim() - 1]), [magnitude.dim() - 1])
    if rtol is None:
        default = max(m, n) * torch.finfo(a.dtype).eps
        rtol_t = scalar(0 if atol is not None else default, top)
    else:
        rtol_t = convert(rtol, top.dtype)
        rtol_t = prims.expand_dims(rtol_t, [rtol_t.dim()]) if rtol_t.dim() else rtol_t
    atol_t = scalar(0, top) if atol is None else convert(atol, top.dtype)
    if atol is not None and atol_t.dim():
        atol_t = prims.expand_dims(atol_t, [atol_t.dim()])
    tol = prims.maximum(atol_t, prims.mul(rtol_t, top))
    keep = prims.gt(magnitude, tol)
    inv = prims.where(keep, prims.reciprocal(values), scalar(0, values))
    if hermitian:
        scaled = prims.mul(vectors, prims.expand_dims(inv, [inv.dim() - 1]))
        return batched_matmul(scaled, aten.transpose.int(vectors, -2, -1))
    v = aten.transpose.int(vh, -2, -1)
    scaled = prims.mul(v, prims.expand_dims(inv, [inv.dim() - 1]))
    return batched_matmul(scaled, aten.transpose.int(u, -2, -1))


@register_decomposition(aten.polar.default)
def polar(magnitude, angle):
    return prims.complex(
        prims.mul(magnitude, prims.cos(angle)), prims.mul(magnitude, prims.sin(angle))
    )
