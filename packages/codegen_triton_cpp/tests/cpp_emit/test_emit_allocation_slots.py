"""Small fixed-size buffers come back to their allocation site's slot when they die and
serve the next call (wrapper._slot_take): no allocation per call, never an output's or a
live buffer's storage, one tensor per concurrent call."""

import threading

import torch

from ember_primops import prims


def _mm_chain(x, w):
    h = prims.exp(prims.mm(x, w))  # the mm's result dies in the exp's kernel
    return (prims.mm(h, w),)


def _data_ptrs(compiled):
    """The data pointers of the dead buffers waiting in each allocation slot."""
    slots = compiled._call.__defaults__[-1]
    return [[t.data_ptr() for t in slot] for slot in slots]


def test_an_intermediate_is_allocated_once_and_outputs_are_fresh(check):
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    _, compiled = check(_mm_chain, x, w, atol=1e-4, rtol=1e-4)
    assert "_slots[0].pop()" in compiled.wrapper_source
    first = _data_ptrs(compiled)
    assert any(first)  # a dead buffer waits in its slot
    out1 = compiled([x, w])[0]
    assert _data_ptrs(compiled) == first  # the same storage served this call
    out2 = compiled([x, 2 * w])[0]
    assert out1.data_ptr() != out2.data_ptr()  # outputs never come from a slot
    torch.testing.assert_close(out1, _mm_chain(x, w)[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(out2, _mm_chain(x, 2 * w)[0], atol=1e-4, rtol=1e-4)


def test_concurrent_calls_get_their_own_buffers(compile_prims):
    x, w = torch.randn(16, 16) / 4, torch.randn(16, 16) / 4
    _, compiled = compile_prims(_mm_chain, x, w)
    inputs = [(x * k, w) for k in range(1, 5)]
    expected = [_mm_chain(a, b)[0] for a, b in inputs]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(200):
                a, b = inputs[k]
                torch.testing.assert_close(compiled([a, b])[0], expected[k], atol=1e-4, rtol=1e-4)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
