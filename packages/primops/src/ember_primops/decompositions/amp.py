"""AMP's GradScaler ops, as elementwise ops and one reduction per gradient."""

from __future__ import annotations

import torch

from ember_primops.decompositions._registry import register_decomposition

aten = torch.ops.aten


@register_decomposition(aten._amp_foreach_non_finite_check_and_unscale.default)
def amp_foreach_non_finite_check_and_unscale(grads, found_inf, inv_scale):
    # eager's kernel: each element times inv_scale, computed in float and cast back to the
    # gradient's dtype; found_inf set to 1.0 where any gradient holds an inf or a nan
    unscaled, any_bad = [], None
    for g in grads:
        product = aten.mul.Tensor(aten._to_copy.default(g, dtype=inv_scale.dtype), inv_scale)
        unscaled.append(aten._to_copy.default(product, dtype=g.dtype))
        bad = aten.any.default(aten.logical_not.default(aten.isfinite.default(g)))
        any_bad = bad if any_bad is None else aten.logical_or.default(any_bad, bad)
    if any_bad is None:
        return unscaled, aten.clone.default(found_inf)
    one = aten.full_like.default(found_inf, 1.0)
    return unscaled, aten.where.self(any_bad, one, found_inf)
