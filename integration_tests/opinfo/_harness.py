"""Run one op_db entry's samples through ``ember.compile(fn, backend=..., fullgraph=True)`` and
compare with eager: the forward outputs, and for ``grads=True`` the gradients of the inputs.

All samples of an entry go into one generated program (one trace, one compile), so that a
sweep costs one C++ build per entry; when the program fails to compile or run, the samples are
retried one at a time to name the first failing one in the repro. Shared by the pytest module
(test_opinfo_backends.py) and the sweep script (sweep.py).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any

import torch
from _classify import classify
from _program import build_program
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import ember

DTYPE = torch.float32
#: where samples live: "cpu" (the C++ target) or "cuda" (the Triton target, on the GPU machine)
DEVICE = os.environ.get("EMBER_OPINFO_DEVICE", "cpu")
#: fullgraph=True (the default) turns every graph break into an error, so that the sweep
#: counts breaks; EMBER_OPINFO_FULLGRAPH=0 runs with breaks, as users do (an entry whose
#: breaks all run must then pass: nothing may raise where eager runs)
FULLGRAPH = os.environ.get("EMBER_OPINFO_FULLGRAPH", "1") != "0"
#: Samples compiled together: one C++ build per chunk keeps builds small and few.
SAMPLES_PER_PROGRAM = 16
TOLERANCES = (1e-4, 1e-4)  # (rtol, atol) like ember-primops' sweep: stages may reassociate
CPU_IMPOSSIBLE = {  # sample generation asserts a GPU
    "jiterator_unary",
    "jiterator_binary",
    "jiterator_4inputs_with_extra_args",
    "jiterator_binary_return_by_ref",
    "jiterator_2inputs_2outputs",
}
UNDEFINED_VALUES = {  # uninitialized memory: compare metadata only
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "empty_permuted",
}


def op_key(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def cpu_float_ops() -> list[Any]:
    """The denominator (the same as ember-primops' sweep): op_db entries supporting float32 or
    float64 on CPU, minus the CUDA-only jiterator entries."""
    return [
        op
        for op in op_db
        if (
            torch.float32 in op.supported_dtypes("cpu")
            or torch.float64 in op.supported_dtypes("cpu")
        )
        and op.name not in CPU_IMPOSSIBLE
    ]


@dataclasses.dataclass
class Outcome:
    status: str  # pass | eager (right, run eagerly: a declared stage limitation) | fail | skipped
    category: str = ""  # one of _classify.CATEGORIES when status == "fail"
    detail: str = ""
    sample: int | str = ""
    shapes: str = ""
    metadata_only: bool = False  # random or undefined values: compared shapes/dtypes only
    fallbacks: tuple[str, ...] = ()  # inductor: prims run through a fallback kernel
    no_backward_graph: bool = False  # gradients right, but no compiled backward graph ran

    def repro(self, key: str, backend: str, phase: str) -> str:
        return (
            f"REPRO backend={backend} phase={phase} op={key} dtype=float32 sample={self.sample} "
            f"shapes={self.shapes} :: {self.category}: {self.detail}  (rerun: python "
            f"integration_tests/opinfo/sweep.py --backends {backend} --ops {key} -v)"
        )


class _RandomnessRecorder(TorchDispatchMode):
    """Notes whether eager drew random numbers (then only metadata can be compared)."""

    def __init__(self) -> None:
        super().__init__()
        self.random = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.random = True
        return func(*args, **(kwargs or {}))


def _fresh(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Copies of the inputs (ops may mutate them); leaves again where grads are wanted."""
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]


def _shapes(sample: Any) -> str:
    leaves = pytree.tree_leaves([sample.input, *sample.args, *sample.kwargs.values()])
    return ",".join(
        f"{list(t.shape)}" if isinstance(t, torch.Tensor) else repr(t)[:20] for t in leaves
    )[:160].replace(" ", "")


def _compare(expected: Any, actual: Any, metadata_only: bool) -> str | None:
    exp_leaves, exp_spec = pytree.tree_flatten(expected)
    act_leaves, act_spec = pytree.tree_flatten(actual)
    if len(exp_leaves) != len(act_leaves):
        return f"output structure {exp_spec} != {act_spec}"
    for i, (e, a) in enumerate(zip(exp_leaves, act_leaves, strict=True)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"output {i}: expected a tensor, got {type(a).__name__}"
            if e.shape != a.shape or e.dtype != a.dtype:
                return f"output {i}: {e.dtype}{list(e.shape)} != {a.dtype}{list(a.shape)}"
            if metadata_only:
                continue
            if type(a) is not torch.Tensor and type(e) is torch.Tensor:
                return f"output {i}: a {type(a).__name__} came back instead of a plain tensor"
            rtol, atol = TOLERANCES
            try:
                torch.testing.assert_close(
                    a.detach(), e.detach(), rtol=rtol, atol=atol, equal_nan=True, check_stride=False
                )
            except AssertionError as err:
                lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
                return f"output {i}: " + " | ".join(lines[:4])
        elif e != a and not (isinstance(e, float) and e != e and a != a):
            return f"output {i}: {e!r} != {a!r}"
    return None


def _loss(outputs: list[Any], samples: list[Any]) -> torch.Tensor | None:
    """sum(output * cotangent) over every differentiable float output (seeded cotangents)."""
    generator = torch.Generator().manual_seed(0)
    total = None
    for out, sample in zip(outputs, samples, strict=True):
        out = sample.output_process_fn_grad(out)
        for leaf in pytree.tree_leaves(out):
            if isinstance(leaf, torch.Tensor) and leaf.requires_grad and leaf.is_floating_point():
                cotangent = torch.randn(leaf.shape, generator=generator, dtype=leaf.dtype)
                cotangent = cotangent.to(leaf.device)
                term = (leaf * cotangent).sum()
                total = term if total is None else total + term
    return total


def _grads(outputs: list[Any], samples: list[Any], inputs: list[torch.Tensor]) -> list[Any]:
    loss = _loss(outputs, samples)
    leaves = [t for t in inputs if t.requires_grad]
    if loss is None or not leaves:
        return []
    return list(torch.autograd.grad(loss, leaves, allow_unused=True))


def _eager_samples(op: Any, grads: bool, max_samples: int | None):
    """Samples eager accepts, with whether each one draws random numbers."""
    samples = list(op.sample_inputs(DEVICE, DTYPE, requires_grad=grads))[:max_samples]
    kept, random = [], []
    for sample in samples:
        recorder = _RandomnessRecorder()
        program = build_program(op, [sample], op_key(op))
        try:
            torch.manual_seed(0)
            with recorder:
                program.fn(*_fresh(program.tensors))
        except Exception:
            continue
        kept.append(sample)
        random.append(recorder.random or op.name in UNDEFINED_VALUES)
    return kept, random


def _run_compiled(program, backend: str):
    ember.reset()
    compiled = ember.compile(program.fn, backend=backend, fullgraph=FULLGRAPH)
    inputs = _fresh(program.tensors)
    torch.manual_seed(0)
    return compiled(*inputs), inputs


def run_entry(op: Any, backend: str, *, grads: bool, max_samples: int | None) -> dict[str, Outcome]:
    """{'forward': Outcome} and, with ``grads``, {'backward': Outcome} for one op_db entry."""
    phases = ["forward", "backward"] if grads else ["forward"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            samples, random = _eager_samples(op, grads, max_samples)
        except Exception as err:
            skipped = Outcome("skipped", detail=f"sample generation failed: {err!r}"[:200])
            return dict.fromkeys(phases, skipped)
        if not samples:
            return dict.fromkeys(phases, Outcome("skipped", detail="eager accepted no sample"))
        return _check(op, backend, samples, random, phases)


#: the worse of two chunks' outcomes decides an entry's
_RANK = {"skipped": 0, "pass": 1, "eager": 2, "fail": 3}


def _check(op, backend, samples, random, phases) -> dict[str, Outcome]:
    """Chunks of samples, one program each; the first failing chunk decides."""
    outcomes: dict[str, Outcome] = {}
    for start in range(0, len(samples), SAMPLES_PER_PROGRAM):
        end = start + SAMPLES_PER_PROGRAM
        chunk = _check_program(op, backend, samples[start:end], random[start:end], phases)
        for phase, outcome in chunk.items():
            if isinstance(outcome.sample, int):  # phases may share one Outcome: copy
                outcome = dataclasses.replace(outcome, sample=outcome.sample + start)
            previous = outcomes.get(phase)
            if previous is None or _RANK[outcome.status] > _RANK[previous.status]:
                outcomes[phase] = outcome
            elif previous.status == outcome.status == "pass":
                previous.metadata_only |= outcome.metadata_only
                previous.fallbacks = tuple(sorted({*previous.fallbacks, *outcome.fallbacks}))
        if all(o.status == "fail" for o in outcomes.values()):
            break
    return outcomes


def _check_program(op, backend, samples, random, phases) -> dict[str, Outcome]:
    program = build_program(op, samples, op_key(op))
    try:
        actual, inputs = _run_compiled(program, backend)
    except Exception as err:
        return dict.fromkeys(phases, _first_failing_sample(op, backend, samples, err))
    stats = dict(ember.counters[backend])
    fallbacks = tuple(sorted(ember.counters["inductor_fallbacks"]))
    eager_graphs = dict(ember.counters["graph_fallbacks"])  # declared stage limitations
    expected_inputs = _fresh(program.tensors)
    torch.manual_seed(0)
    expected = program.fn(*expected_inputs)
    outcomes: dict[str, Outcome] = {}
    forward = Outcome("pass", metadata_only=any(random), fallbacks=fallbacks)
    for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
        problem = _compare(e, a, random[index])
        if problem is not None:
            forward = Outcome("fail", "mismatch", problem[:300], index, _shapes(samples[index]))
            break
    if forward.status == "pass" and not stats.get("forward_runs") and not eager_graphs:
        # right results (compared first: a break that ran eagerly must still be right)
        failure = Outcome("fail", "no_graph", f"no compiled graph ran: counters {stats}", "all")
        return dict.fromkeys(phases, failure)
    outcomes["forward"] = forward
    if "backward" in phases:
        outcomes["backward"] = _check_grads(
            backend, samples, random, (expected, expected_inputs), (actual, inputs), forward
        )
    if eager_graphs:  # right results, but (some of) the program ran eagerly: not a pass
        detail = f"graphs run eagerly: {eager_graphs}"[:300]
        for phase, outcome in outcomes.items():
            if outcome.status == "pass":
                outcomes[phase] = Outcome("eager", "", detail, "all")
    return outcomes


def _check_grads(backend, samples, random, eager, compiled, forward: Outcome) -> Outcome:
    if forward.status == "fail":
        return forward
    try:
        expected = _grads(eager[0], samples, eager[1])
        before = ember.counters[backend]["backward_runs"]
        actual = _grads(compiled[0], samples, compiled[1])
    except Exception as err:
        category, detail = classify(err)
        return Outcome("fail", category, detail, "all")
    problem = _compare(expected, actual, any(random))
    if problem is not None:
        return Outcome("fail", "mismatch", f"gradient {problem}"[:300], "all")
    # Outputs that are views of inputs get their gradients from autograd's view tracking,
    # outside any backward graph: a pass, but counted apart.
    no_graph = bool(expected) and ember.counters[backend]["backward_runs"] == before
    return Outcome("pass", metadata_only=any(random), no_backward_graph=no_graph)


def _first_failing_sample(op, backend, samples, err: BaseException) -> Outcome:
    """The bundled program failed: name the first sample that fails on its own."""
    for index, sample in enumerate(samples):
        try:
            _run_compiled(build_program(op, [sample], op_key(op)), backend)
        except Exception as single:
            category, detail = classify(single)
            return Outcome("fail", category, detail, index, _shapes(sample))
    category, detail = classify(err)
    return Outcome("fail", category, detail, "all")
