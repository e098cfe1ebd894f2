"""The attention prims as extern calls in the Triton target's wrapper (under the CPU
interpreter): tuple results, transposed views, results equal to eager."""

from test_emit_attention import (
    attention_backward,
    attention_forward,
    backward_inputs,
    forward_inputs,
)


def test_forward_through_triton(check):
    compiled = check(attention_forward, *forward_inputs())
    assert "sdpa_flash_cpu" in compiled.wrapper_source


def test_backward_through_triton(check):
    compiled = check(attention_backward, *backward_inputs())
    assert "sdpa_flash_cpu_backward" in compiled.wrapper_source
