"""What min-cut saves for a decoder training step in mixed precision (a float32 residual
stream, bfloat16 matmuls and attention, a float32 cross entropy over the logits, autocast's
pattern written out): the logits once and in bfloat16 (never their float32 copy or the log
softmax), no value together with its own cast, and gradients equal to eager's."""

import torch
import torch.nn.functional as F

from conftest import CountingCompiler, leaves
from ember_aot_autograd import aot_function, min_cut_rematerialization_partition, trace_joint

B, S, D, HEADS, VOCAB = 2, 16, 32, 4, 96
bf16 = torch.bfloat16


def attention(h, w_qkv, w_o):
    q, k, v = (h @ w_qkv.to(bf16)).split(D, -1)
    q, k, v = (t.reshape(B, S, HEADS, D // HEADS).transpose(1, 2) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return out.transpose(1, 2).reshape(B, S, D) @ w_o.to(bf16)


def decoder_step(x, w_qkv, w_o, w_up, w_down, w_head, labels):
    x = x + attention(F.layer_norm(x, (D,)).to(bf16), w_qkv, w_o)
    up = F.layer_norm(x, (D,)).to(bf16) @ w_up.to(bf16)
    x = x + F.gelu(up) @ w_down.to(bf16)
    logits = F.layer_norm(x, (D,)).to(bf16) @ w_head.to(bf16)
    return F.cross_entropy(logits.float().reshape(-1, VOCAB), labels.reshape(-1))


def step_inputs():
    torch.manual_seed(0)
    shapes = [(D, 3 * D), (D, D), (D, 4 * D), (4 * D, D), (D, VOCAB)]
    weights = [(torch.randn(s) / s[0] ** 0.5).requires_grad_() for s in shapes]
    x = torch.randn(B, S, D, requires_grad=True)
    return [x, *weights, torch.randint(0, VOCAB, (B, S))]


def saved_nodes(part):
    names = set(part.report.saved)
    return [n for n in part.fw_gm.graph.nodes if n.name in names and n.op != "placeholder"]


def test_logits_are_saved_once_in_bf16():
    part = min_cut_rematerialization_partition(trace_joint(decoder_step, step_inputs()))
    logits_sized = [n for n in saved_nodes(part) if n.meta["val"].numel() == B * S * VOCAB]
    assert [n.meta["val"].dtype for n in logits_sized] == [bf16]


def test_no_value_is_saved_with_its_cast():
    part = min_cut_rematerialization_partition(trace_joint(decoder_step, step_inputs()))
    saved = set(saved_nodes(part))
    casts = [n for n in saved if n.target is torch.ops.aten._to_copy.default]
    assert not [n for n in casts if n.args[0] in saved]


def test_decoder_gradients_equal_eager():
    fw, bw = CountingCompiler(), CountingCompiler()
    compiled = aot_function(decoder_step, fw, bw, partition_fn=min_cut_rematerialization_partition)
    eager_in, compiled_in = leaves(step_inputs()), leaves(step_inputs())
    decoder_step(*eager_in).backward()
    compiled(*compiled_in).backward()
    assert fw.calls == 1 and bw.calls == 1
    for want, got in zip(eager_in[:-1], compiled_in[:-1], strict=True):
        torch.testing.assert_close(got.grad, want.grad, rtol=0, atol=0)
