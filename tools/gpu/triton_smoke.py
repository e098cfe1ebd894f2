"""GPU smoke test of the inductor backend's Triton target (run by inductor_h200.sh smoke):
small graphs and every zoo model at tiny size, inference and a training step, default mode and
reduce-overhead (CUDA graphs), each checked against eager with kernel counts reported."""

from __future__ import annotations

import dataclasses
import os
import time
import traceback

import torch
import torch.nn.functional as F

import ember
import ember_zoo


def chain(x):
    for _ in range(5):
        x = torch.sigmoid(x * 1.1 + 0.1)
    return x


def small_graphs():
    x = torch.randn(513, 1031, device="cuda")
    w = torch.randn(1031, device="cuda")
    return {
        "chain": (chain, (x,)),
        "softmax": (lambda t: torch.softmax(t, -1), (x,)),
        "layernorm": (lambda t, g: F.layer_norm(t, (t.shape[-1],), g), (x, w)),
        "sum_all": (lambda t: t.sum(), (x,)),
        "var_mean_cols": (lambda t: torch.var_mean(t, 0), (x,)),
        "argmax": (lambda t: t.argmax(-1), (x,)),
        "bf16_softmax": (lambda t: torch.softmax(t, -1), (x.bfloat16(),)),
        "matmul_gelu": (
            lambda t, m: F.gelu(t @ m),
            (x[:, :512], torch.randn(512, 256, device="cuda")),
        ),
    }


def sdpa_cases():
    """SDPA as HF calls it (B, H, L, E from a transpose), fp16/bf16 and fp32: the fused CUDA
    kernels (flash, efficient) must stay one extern each way, forward and backward."""
    cases = {}
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        q, k, v = (torch.randn(4, 128, 8, 64, device="cuda", dtype=dtype).transpose(1, 2)
                   for _ in range(3))  # fmt: skip
        mask = torch.rand(4, 1, 128, 128, device="cuda") > 0.2
        tag = str(dtype).removeprefix("torch.")
        cases[f"sdpa_causal_{tag}"] = (
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            (q, k, v),
        )
        cases[f"sdpa_mask_{tag}"] = (
            lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
            (q, k, v, mask),
        )
    return cases


def run_sdpa(failures):
    for name, (fn, args) in sdpa_cases().items():
        ember.reset()
        tol = 1e-4 if args[0].dtype == torch.float32 else 2e-2
        try:
            leaves = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
            twins = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
            expected = fn(*leaves)
            expected.float().sum().backward()
            got = ember.compile(fn, fullgraph=True)(*twins)
            got.float().sum().backward()
            ok = close(got, expected, tol)
            ok &= all(
                close(b.grad, a.grad, 5 * tol)
                for a, b in zip(leaves, twins, strict=True)
                if a.grad is not None
            )
            stats = ember.counters["inductor"]
            print(f"{name:20s} {'ok' if ok else 'MISMATCH'} kernels={stats['kernels']} "
                  f"fallbacks={dict(ember.counters['aten_fallbacks'])}")  # fmt: skip
            if not ok:
                failures.append(name)
        except Exception:
            failures.append(name)
            print(f"{name:20s} ERROR\n{traceback.format_exc()[-1500:]}")


def close(a, b, tol):
    if isinstance(a, (tuple, list)):
        return all(close(x, y, tol) for x, y in zip(a, b, strict=True))
    if not a.is_floating_point():
        return torch.equal(a, b)
    return torch.allclose(a.float(), b.float(), rtol=tol, atol=tol)


def run_small(failures):
    for name, (fn, args) in small_graphs().items():
        ember.reset()
        try:
            got = ember.compile(fn, fullgraph=True)(*args)
            tol = 2e-2 if args[0].dtype == torch.bfloat16 else 1e-4
            ok = close(got, fn(*args), tol)
            print(
                f"{name:16s} {'ok' if ok else 'MISMATCH'} kernels={ember.counters['inductor']['kernels']}"
            )
            if not ok:
                failures.append(name)
        except Exception:
            failures.append(name)
            print(f"{name:16s} ERROR\n{traceback.format_exc()[-1500:]}")


def layer_softmax(x, w):
    return torch.softmax(F.layer_norm(x, (x.shape[-1],)) @ w, -1) * x.shape[0]


def run_dynamic_reduce_overhead(failures):
    """A symbolic function (dynamic=True) under reduce-overhead at 4 sizes, each called 3
    times: one graph, symbolic Triton kernels, one CUDA-graph capture per size (at most
    options['cudagraph_sizes'] = 3 here: the fourth size runs uncaptured)."""
    ember.reset()
    label = "dynamic/reduce-overhead"
    try:
        w = torch.randn(64, 48, device="cuda")
        compiled = ember.compile(
            layer_softmax, mode="reduce-overhead", dynamic=True, options={"cudagraph_sizes": 3}
        )
        ok = True
        for rows in (7, 130, 1000, 33):
            for _ in range(3):
                x = torch.randn(rows, 64, device="cuda")
                ok &= close(compiled(x, w), layer_softmax(x, w), 1e-4)
        torch.cuda.synchronize()
        stats, graphs = ember.counters["inductor"], ember.counters["cudagraphs"]
        print(
            f"{label:24s} {'ok' if ok else 'MISMATCH'} graphs fw={stats['forward_graphs']} "
            f"static_specializations={stats['static_specializations']} "
            f"captures={graphs['captures']} replays={graphs['replays']} "
            f"uncaptured_size_runs={graphs['uncaptured_size_runs']} "
            f"(want 1 graph, 0 specializations, 3 captures, 3 uncaptured runs)"
        )
        expected = (stats["forward_graphs"], stats["static_specializations"], graphs["captures"],
                    graphs["uncaptured_size_runs"]) == (1, 0, 3, 3)  # fmt: skip
        if not ok or not expected:
            failures.append(label)
    except Exception:
        failures.append(label)
        print(f"{label:24s} ERROR\n{traceback.format_exc()[-2500:]}")


def channels_last_reference(case):
    """The case run channels-last where the model has 2-d convolutions, else None: a deep
    network's training gradients move by up to a third between eager's own NCHW and NHWC
    runs (ResNet-50 at tiny size: tools/gpu/layout_sensitivity.py), the yardstick for
    Ember's channels-last training on the GPU (measured on the H100: Ember's gradients stay
    within 3.6x of that spread, parameter by parameter)."""
    if not any(isinstance(m, torch.nn.Conv2d) for m in case.model.modules()):
        return None
    case.model.to(memory_format=torch.channels_last)
    inputs = tuple(
        x.to(memory_format=torch.channels_last) if x.dim() == 4 else x for x in case.example_inputs
    )
    return dataclasses.replace(case, example_inputs=inputs)


def run_zoo(failures, mode):
    only = os.environ.get("SMOKE_MODELS")
    for name in only.split(",") if only else ember_zoo.names():
        for train in (False, True):
            ember.reset()
            label = f"{name}/{'train' if train else 'infer'}/{mode or 'default'}"
            try:
                case = ember_zoo.build(name, "tiny", device="cuda")
                twin = ember_zoo.build(name, "tiny", device="cuda")
                # the GPU trains convolutions channels-last: eager's own NHWC run says how far
                # rounding alone moves this model's gradients
                nhwc = channels_last_reference(ember_zoo.build(name, "tiny", device="cuda"))
                compiled = ember.compile(twin.model, mode=mode)
                start = time.perf_counter()
                ok = True
                for _ in range(3):  # the third call replays the CUDA graph under reduce-overhead
                    if train:
                        models = [case.model, twin.model] + ([nhwc.model] if nhwc else [])
                        for m in models:
                            m.zero_grad(set_to_none=True)
                        expected = case.loss(case.run())
                        expected.backward()
                        if nhwc:
                            nhwc.loss(nhwc.run()).backward()
                        got = twin.loss(twin.run(compiled))
                        got.backward()
                        ok &= close(got, expected, 1e-3)
                        spreads = [
                            None if p.grad is None else float((r.grad - p.grad).abs().max())
                            for p, r in zip(
                                case.model.parameters(),
                                (nhwc or case).model.parameters(),
                                strict=True,
                            )
                        ]
                        for p, q, spread in zip(
                            case.model.parameters(), twin.model.parameters(), spreads, strict=True
                        ):
                            if p.grad is None or close(q.grad, p.grad, 2e-3):
                                continue
                            if float((q.grad - p.grad).abs().max()) <= 4 * spread:
                                # the order of eager's own NCHW-vs-NHWC spread: Ember rounds
                                # otherwise than either (its batch norm is Triton's)
                                continue
                            ok = False
                            print(f"   grad {tuple(p.shape)}: max abs diff "
                                  f"{float((q.grad - p.grad).abs().max()):.2e}, eager's "
                                  f"NCHW-vs-NHWC spread {spread:.2e}")  # fmt: skip
                    else:
                        with torch.no_grad():
                            expected = ember_zoo.output_tensors(case.run())
                            got = ember_zoo.output_tensors(twin.run(compiled))
                        ok &= close(got, expected, 1e-3)
                torch.cuda.synchronize()
                stats = ember.counters["inductor"]
                graphs = ember.counters["cudagraphs"]
                print(
                    f"{label:40s} {'ok' if ok else 'MISMATCH'} graphs fw={stats['forward_graphs']} "
                    f"bw={stats['backward_graphs']} kernels={stats['kernels']} "
                    f"cudagraph captures={graphs['captures']} replays={graphs['replays']} "
                    f"{time.perf_counter() - start:.1f}s"
                )
                if not ok or stats["forward_graphs"] == 0:
                    failures.append(label)
                    pairs = zip(
                        ember_zoo.output_tensors(got),
                        ember_zoo.output_tensors(expected),
                        strict=False,
                    )
                    print(
                        "   max abs diffs:",
                        [float((a.float() - b.float()).abs().max()) for a, b in pairs],
                    )
            except Exception:
                failures.append(label)
                print(f"{label:40s} ERROR\n{traceback.format_exc()[-2500:]}")


def main():
    failures: list[str] = []
    if not os.environ.get("SMOKE_MODELS"):  # SMOKE_MODELS=a,b: only those zoo models
        run_small(failures)
        run_sdpa(failures)
        run_dynamic_reduce_overhead(failures)
    run_zoo(failures, None)
    run_zoo(failures, "reduce-overhead")
    print(f"smoke failures: {len(failures)} {failures}")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
