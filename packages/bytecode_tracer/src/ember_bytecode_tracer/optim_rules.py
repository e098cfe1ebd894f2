"""The optimizer and gradient-clipping math the tracer inlines into graphs.

`optimizer.step()` of SGD, Adam and AdamW and `clip_grad_norm_` are not traced through
torch.optim's own code (hooks, profiler scopes, device grouping, `.item()` reads): the
tracer gathers the parameters, gradients and state tensors itself (variables/optimizer.py)
and inlines these plain functions over them, so a step becomes one graph of in-place
updates. Each follows the single-tensor implementation of torch.optim op for op; torch's
foreach implementation computes the same values. The one difference: eager reads the step
count with `.item()` and computes the bias corrections in Python floats, here they are
float64 0-d tensors in the graph (so a new step count needs no recompile).

The functions run eagerly too, which is how the tests check them against torch.optim.
"""

from __future__ import annotations

import torch


def sgd_update(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    buffers: list[torch.Tensor | None],
    lr: float,
    momentum: float,
    dampening: float,
    weight_decay: float,
    nesterov: bool,
    maximize: bool,
) -> list[torch.Tensor | None]:
    """torch.optim.SGD's step over one group; returns the momentum buffers (new ones made
    on the first step, as eager does, for the caller to store in the optimizer state)."""
    new_buffers = []
    with torch.no_grad():
        for param, grad, buf in zip(params, grads, buffers):  # noqa: B905 (the tracer folds plain zip)
            if maximize:
                grad = -grad
            if weight_decay != 0:
                grad = grad.add(param, alpha=weight_decay)
            if momentum != 0:
                if buf is None:
                    buf = torch.clone(grad).detach()
                else:
                    buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                if nesterov:
                    grad = grad.add(buf, alpha=momentum)
                else:
                    grad = buf
            new_buffers.append(buf)
            param.add_(grad, alpha=-lr)
    return new_buffers


def adam_update(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    exp_avgs: list[torch.Tensor],
    exp_avg_sqs: list[torch.Tensor],
    steps: list[torch.Tensor],
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    maximize: bool,
    decoupled_weight_decay: bool,
) -> None:
    """torch.optim.Adam's (and AdamW's, decoupled) step over one group, amsgrad off."""
    with torch.no_grad():
        for param, grad, exp_avg, exp_avg_sq, step_t in zip(  # noqa: B905
            params, grads, exp_avgs, exp_avg_sqs, steps
        ):
            if maximize:
                grad = -grad
            step_t += 1
            if weight_decay != 0:
                if decoupled_weight_decay:
                    param.mul_(1 - lr * weight_decay)
                else:
                    grad = grad.add(param, alpha=weight_decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step = step_t.to(torch.float64)
            bias_correction1 = 1 - torch.pow(beta1, step)
            bias_correction2 = 1 - torch.pow(beta2, step)
            step_size = lr / bias_correction1
            bias_correction2_sqrt = bias_correction2.sqrt()
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
            param.sub_(exp_avg / denom * step_size)


def clip_grad_norm(grads: list[torch.Tensor], max_norm: float, norm_type: float) -> torch.Tensor:
    """torch.nn.utils.clip_grad_norm_ over the gradients (error_if_nonfinite off): the
    total norm is the norm of the per-gradient norms; gradients are scaled in place."""
    with torch.no_grad():
        norms = [torch.linalg.vector_norm(g, norm_type) for g in grads]
        total_norm = torch.linalg.vector_norm(torch.stack(norms), norm_type)
        clip_coef = max_norm / (total_norm + 1e-6)
        clip_coef_clamped = torch.clamp(clip_coef, max=1.0)
        for g in grads:
            g.mul_(clip_coef_clamped)
    return total_norm
