"""Min-cut keeps recomputation short and local: a residual stack whose float32 sums the
backward could rebuild from the first one and every block's bfloat16 branch (the cheapest
cut by bytes) saves a sum every few blocks instead, and each recomputed value is computed
just before the backward first reads it, not all at the start."""

import torch
import torch.nn.functional as F

from conftest import CountingCompiler, leaves
from ember_aot_autograd import aot_function, min_cut_rematerialization_partition, trace_joint
from ember_aot_autograd.op_kinds import returns_views
from ember_aot_autograd.partition.common import descendants
from ember_aot_autograd.partition.mincut import MAX_RECOMPUTE_CHAIN

BLOCKS, WIDTH = 12, 16


def residual_stack(x, *weights):
    """Pre-norm blocks: a float32 residual stream, each branch in bfloat16 (autocast's
    pattern, written out); a layer norm's backward reads each block's residual sum."""
    for w in weights:
        branch = F.layer_norm(x, (WIDTH,)).to(torch.bfloat16) @ w.to(torch.bfloat16)
        x = x + F.gelu(branch)
    return x.square().mean()


def stack_inputs():
    torch.manual_seed(0)
    weights = [torch.randn(WIDTH, WIDTH, requires_grad=True) / 4 for _ in range(BLOCKS)]
    return [
        torch.randn(8, WIDTH, requires_grad=True),
        *[w.detach().requires_grad_() for w in weights],
    ]


def recomputed(bw: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """Backward nodes that read no tangent: values rebuilt from what the forward saved."""
    tangents = [n for n in bw.graph.nodes if n.op == "placeholder" and "tangent" in n.name]
    from_tangents = descendants(tangents)
    return [n for n in bw.graph.nodes if n.op == "call_function" and n not in from_tangents]


def computes(node: torch.fx.Node) -> bool:
    """Counted in a chain: not a view, not a dtype cast, not an item of a tuple."""
    schema = getattr(node.target, "_schema", None)
    return schema is not None and not returns_views(node.target) and schema.name != "aten::_to_copy"


def longest_chain(nodes: list[torch.fx.Node]) -> int:
    """The most computing ops on one path through `nodes`."""
    length: dict[torch.fx.Node, int] = {}
    for node in nodes:
        inputs = [length[i] for i in node.all_input_nodes if i in length]
        length[node] = max(inputs, default=0) + computes(node)
    return max(length.values(), default=0)


def test_recompute_chains_are_bounded():
    joint = trace_joint(residual_stack, stack_inputs())
    part = min_cut_rematerialization_partition(joint)
    rebuilt = recomputed(part.bw_gm)
    assert rebuilt, "the gelus and casts are still recomputed"
    # without the bound, the last block's sum is rebuilt from the first through all twelve
    assert longest_chain(rebuilt) <= MAX_RECOMPUTE_CHAIN
    # some of the float32 sums are saved now, but far from all of them
    saved_f32 = [
        n for n in part.fw_gm.graph.nodes if n.name in part.report.saved and n.op != "placeholder"
        and n.meta["val"].dtype == torch.float32 and n.meta["val"].shape == (8, WIDTH)
    ]  # fmt: skip
    assert 0 < len(saved_f32) < BLOCKS


def test_recomputed_values_come_just_before_their_first_use():
    joint = trace_joint(residual_stack, stack_inputs())
    bw = min_cut_rematerialization_partition(joint).bw_gm
    order = {n: k for k, n in enumerate(bw.graph.nodes)}
    rebuilt = set(recomputed(bw))
    for node in rebuilt:
        first_use = min(order[u] for u in node.users)
        between = [n for n in bw.graph.nodes if order[node] < order[n] < first_use]
        # only other values the same use needs lie between a value and its first use
        assert all(n in rebuilt for n in between), (node, between)
    # so the first block's rebuilt values come after the last block's gradient work began
    first_mm = min(order[n] for n in bw.graph.nodes if n.target is torch.ops.aten.mm.default)
    assert sum(order[n] > first_mm for n in rebuilt) > len(rebuilt) // 2


def test_bounded_chains_compute_the_eager_gradients_bit_for_bit():
    fw, bw = CountingCompiler(), CountingCompiler()
    compiled = aot_function(
        residual_stack, fw, bw, partition_fn=min_cut_rematerialization_partition
    )
    eager_in, compiled_in = leaves(stack_inputs()), leaves(stack_inputs())
    residual_stack(*eager_in).backward()
    compiled(*compiled_in).backward()
    assert fw.calls == 1 and bw.calls == 1
    for want, got in zip(eager_in, compiled_in, strict=True):
        torch.testing.assert_close(got.grad, want.grad, rtol=0, atol=0)


def test_a_chain_past_a_taken_value_does_not_take_it_again():
    # a shared value (two users) then a long unshared chain after it: once the shared value
    # is taken, the next long chain must be cut further on, not at the taken value again
    def shared_then_long(x):
        s = x * 2
        y = s
        for _ in range(2 * MAX_RECOMPUTE_CHAIN):
            y = y * 1.5 + 1
        return y.sin().sum() + s.sin().sum()  # both sines' backwards read their inputs

    x = torch.randn(8, requires_grad=True)
    part = min_cut_rematerialization_partition(trace_joint(shared_then_long, [x]))
    assert longest_chain(recomputed(part.bw_gm)) <= MAX_RECOMPUTE_CHAIN
