"""Reduction code of the Triton kernels (a mixin of kernel.KernelBuilder).

Per kernel kind: *persistent* masks the whole row tile with the identity and reduces it;
*looped* keeps one accumulator per lane ([XBLOCK, RBLOCK]) updated each iteration and
reduces the lanes after the loop; a *split* reduction's partial kernel does the looped
reduction over its chunk and stores the per-chunk result into a workspace, and its finishing
kernel loads the NSPLIT partials of a row as a tile and reduces them with the same combine.
Welford (mean, m2, count) is two-pass in registers when persistent, lane-wise Welford
updates plus a Welford combine otherwise; argmax/argmin carry (value, index) pairs.
"""

from __future__ import annotations

from typing import Any

import torch

from .dtypes import compute_type
from .op_table import TritonValue
from .reductions import ARG_SENTINEL, extreme, reduction_kind, wide_type

#: a looped Welford update multiplies by one reciprocal of its pass's count instead of
#: dividing every element by its lane's count. Off: the reciprocal form has fewer SASS
#: instructions but ran slower on the H200 (ResNet-50 training 24.2 against 23.7 ms a step,
#: EfficientNet-B0 41.6 against 36.0 ms; tools/gpu/stats_ab.sh, 2026-12-02)
WELFORD_RECIPROCAL_A_PASS = False

_TORCH_OF = {"tl.float32": torch.float32, "tl.float64": torch.float64, "tl.int64": torch.int64,
             "tl.int32": torch.int32, "tl.int1": torch.bool, "tl.int8": torch.int8,
             "tl.int16": torch.int16, "tl.uint8": torch.uint8}  # fmt: skip


class ReductionEmitter:
    """Needs from its host: kind, part, config, xnumel, group, pointer(), workspaces,
    writers _pro / _body / _epi, and the counters _nred / _reds."""

    # -- reductions ------------------------------------------------------------------------
    def reduction(
        self, dtype: torch.dtype, src: torch.dtype, rtype: str, value: TritonValue
    ) -> Any:
        key = (rtype, value.expr, dtype, src)
        if key not in self._reds:
            k = self._nred
            self._nred += 1
            if rtype in ("argmax", "argmin"):
                result = self._arg_reduction(k, rtype, dtype, src, value)
            elif rtype == "welford":
                result = self._welford(k, dtype, src, value)
            else:
                result = self._simple(k, rtype, dtype, src, value)
            self._reds[key] = result
        return self._reds[key]

    def _workspace(self, k: int, part: str, acc_type: str) -> str:
        name = f"{self.group.name}_ws{k}{part}"
        self.params[name] = self.part == "partial"  # also while the finish run discards
        if self.part == "partial":
            numel = self.xnumel * self.config.NSPLIT
            self.workspaces.append(self._make_workspace(name, numel, _TORCH_OF[acc_type]))
        return f"ptr_{name}"

    def _partials(self, k: int, parts: list[tuple[str, str, str, str]]) -> None:
        """Split kernels: store (partial) or load (finish) the per-chunk partial results.
        ``parts``: (suffix, accumulator / tile name, Triton type, identity literal)."""
        for suffix, name, acc_type, ident in parts:
            ws = self._workspace(k, suffix, acc_type)
            if self.part == "partial":
                self._epi.line(f"tl.store({ws} + xindex, {name}, xmask)")
            else:
                self._epi.line(  # part-major workspace (see kernel.py's partial header)
                    f"{name} = tl.load({ws} + (rindex * {self.xnumel} + xindex), rxmask, "
                    f"other={ident})"
                )

    def _result(
        self, k: int, expr: str, dtype: torch.dtype, have: str, name: str = ""
    ) -> TritonValue:
        target = compute_type(dtype)
        name = name or f"red{k}"
        self._epi.line(f"{name} = {expr}" + (f".to({target})" if have != target else ""))
        return TritonValue(name, dtype)

    def _cast(self, value: TritonValue, acc_type: str) -> str:
        return value.expr if compute_type(value.dtype) == acc_type else f"{value}.to({acc_type})"

    def _simple(self, k: int, rtype: str, dtype: torch.dtype, src: torch.dtype, value) -> Any:
        kind = reduction_kind(rtype)
        acc_t, ident = kind.acc_type(dtype, src), kind.identity(dtype, src)
        acc, v = f"acc{k}", self._cast(value, acc_t)
        identity = f"tl.full([], {ident}, {acc_t})"
        if self.kind == "persistent":
            self._body.line(f"{acc} = tl.where(rxmask, {v}, {identity})")
        elif self.part != "finish":
            self._pro.line(f"{acc} = tl.full([XBLOCK, RBLOCK], {ident}, {acc_t})")
            self._body.line(f"{acc} = tl.where(rxmask, {kind.combine(acc, v)}, {acc})")
        if self.part == "partial":
            self._epi.line(f"{acc}_p = {kind.tile(acc)}")
            self._partials(k, [("", f"{acc}_p", acc_t, ident)])
            return TritonValue(f"red{k}", dtype)
        if self.part == "finish":
            self._partials(k, [("", acc, acc_t, ident)])
        return self._result(k, kind.tile(acc), dtype, acc_t)

    def _arg_reduction(self, k: int, rtype: str, dtype: torch.dtype, src: torch.dtype, value):
        acc_t, ident = compute_type(src), extreme(src, largest=rtype == "argmin")
        fn = f"_em_{rtype}_combine"
        av, ai = f"acc{k}_v", f"acc{k}_i"
        if self.kind == "persistent":
            self._body.line(f"{av} = tl.where(rxmask, {value}, tl.full([], {ident}, {acc_t}))")
            self._body.line(f"{ai} = tl.where(rxmask, rindex.to(tl.int64), {ARG_SENTINEL})")
        elif self.part != "finish":
            self._pro.line(f"{av} = tl.full([XBLOCK, RBLOCK], {ident}, {acc_t})")
            self._pro.line(f"{ai} = tl.full([XBLOCK, RBLOCK], {ARG_SENTINEL}, tl.int64)")
            self._body.line(f"{av}_n, {ai}_n = {fn}({av}, {ai}, {value}, rindex.to(tl.int64))")
            self._body.line(f"{av} = tl.where(rxmask, {av}_n, {av})")
            self._body.line(f"{ai} = tl.where(rxmask, {ai}_n, {ai})")
        tile = f"_em_reduce_{rtype}({av}, {ai})"
        parts = [("v", av, acc_t, ident), ("i", ai, "tl.int64", str(ARG_SENTINEL))]
        if self.part == "partial":
            self._epi.line(f"{av}, {ai} = {tile}")
            self._partials(k, parts)
            return TritonValue(f"red{k}", dtype)
        if self.part == "finish":
            self._partials(k, parts)
        self._epi.line(f"{av}_r, {ai}_r = {tile}")
        return self._result(k, f"{ai}_r", dtype, "tl.int64")

    def _welford(self, k: int, dtype: torch.dtype, src: torch.dtype, value) -> Any:
        acc_t = wide_type(src if src.is_floating_point else torch.float32)
        v = self._cast(value, acc_t)
        m, m2, w = f"acc{k}_mean", f"acc{k}_m2", f"acc{k}_w"
        if self.kind == "persistent":
            body = self._body
            body.line(f"{w} = tl.sum(tl.where(rxmask, 1.0, 0.0).to({acc_t}), 1, keep_dims=True)")
            body.line(f"{m} = tl.sum(tl.where(rxmask, {v}, 0.0), 1, keep_dims=True) / {w}")
            body.line(f"acc{k}_dev = tl.where(rxmask, {v} - {m}, 0.0)")
            body.line(f"{m2} = tl.sum(acc{k}_dev * acc{k}_dev, 1, keep_dims=True)")
            results = [m, m2, w]
        else:
            if self.part != "finish":
                for name in (m, m2, w):
                    self._pro.line(f"{name} = tl.zeros([XBLOCK, RBLOCK], {acc_t})")
                body = self._body
                body.line(f"acc{k}_d = {v} - {m}")
                body.line(f"acc{k}_w1 = {w} + 1.0")
                # every lane that updates in pass j updated in passes 0..j-1 (the row mask
                # only ends a row), so its count is j+1: one reciprocal a pass for all of
                # the tile's lanes, not a division an element (ResNet-50's batch-norm
                # statistics spent about half their instructions dividing)
                if WELFORD_RECIPROCAL_A_PASS:
                    body.line(f"acc{k}_rw = 1.0 / (roffset // RBLOCK + 1.0)")
                    body.line(f"acc{k}_m1 = {m} + acc{k}_d * acc{k}_rw")
                else:
                    body.line(f"acc{k}_m1 = {m} + acc{k}_d / acc{k}_w1")
                body.line(f"{m2} = tl.where(rxmask, {m2} + acc{k}_d * ({v} - acc{k}_m1), {m2})")
                body.line(f"{m} = tl.where(rxmask, acc{k}_m1, {m})")
                body.line(f"{w} = tl.where(rxmask, acc{k}_w1, {w})")
            tile = f"_em_reduce_welford({m}, {m2}, {w})"
            parts = [(s, n, acc_t, "0.0") for s, n in (("m", m), ("m2", m2), ("w", w))]
            if self.part == "partial":
                self._epi.line(f"{m}, {m2}, {w} = {tile}")
                self._partials(k, parts)
                return tuple(TritonValue(f"red{k}", dtype) for _ in range(3))
            if self.part == "finish":
                self._partials(k, parts)
            self._epi.line(f"{m}_r, {m2}_r, {w}_r = {tile}")
            results = [f"{m}_r", f"{m2}_r", f"{w}_r"]
        return tuple(
            self._result(k, name, dtype, acc_t, f"red{k}_{j}") for j, name in enumerate(results)
        )
