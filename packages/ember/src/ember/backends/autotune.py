"""`autotune`: each graph compiled by every candidate backend that applies, timed, the fastest kept.

Candidates (a table: name -> which devices it compiles for, whether only on request):

    eager                the torch-level graph as is
    aot_eager            ember-aot-autograd + prims, run as FX graphs
    inductor             the whole pipeline, C++ on CPU / Triton on CUDA
    inductor-cudagraphs  inductor replayed as CUDA graphs (mode="reduce-overhead"); CUDA only
    max-autotune         inductor + Triton config benchmarking + CUDA graphs; CUDA only, and
                         only when asked (mode="max-autotune", options={"max_autotune": True}
                         or named in options["candidates"])

Each is timed as it will be called (autotune_timing.py: clones of the example inputs made
once and reused by every run, as the model passes the same parameters call after call;
warm-up runs, then interleaved rounds of back-to-back calls within a time budget; clearly
slower candidates raced out). What is kept (autotune_choice.py): `inductor`, what
backend="inductor" runs, unless another candidate is clearly faster: in enough rounds to
rule out chance (a sign test) and by more than `margin` (0 by default) in the median
per-round ratio. So autotune is never slower than inductor beyond the timing's noise, and a
graph that inductor makes measurably slower than eager runs eagerly. Training graphs (grad
mode on, an input requiring grad) are timed forward + backward, so the forward/backward
pair the aot backends make is decided as one.

The decision is stored on disk (artifact cache level `autotune`, under EMBER_CACHE_DIR)
keyed by the graph's code, its inputs' shapes/strides/dtypes/devices/requires_grad, grad
mode, the candidates and settings, and the code fingerprint (torch's version, the stages'
sources); a later process compiles only the kept candidate, without timing anything.
`EMBER_ARTIFACT_CACHE=0` turns the store off.

Options (`ember.compile(fn, backend="autotune", options={...})`): "candidates" (a list of the
names above), "time_budget_s" (timing per graph, default 1.0), "warmup" (untimed runs per
candidate, default 2), "min_runs" / "max_runs" (timed rounds: at least 5, past the budget
if need be, the fewest in which the sign test can rule out chance; at most 50, or 4x that
within the budget while a challenger leads inductor without proof), "margin";
inductor's own options ("target", "dynamic_specializations", ...) are passed on to the
inductor candidates.

Observability: `EMBER_LOGS=autotune` logs each graph's timings and choice;
`last_decisions()` returns the recent `Decision`s (for reports), each also sent as an
`autotune` event on the `ember.events` logger (the compile trace records it);
`ember.counters["autotune"]` counts graphs, timed / stored / untimed decisions, `kept_<name>`, `timing_runs`
(timed calls), `candidate_failures`, `raced_out`. Timing runs are not counted in the candidates' `*_runs` counters.
"""

from __future__ import annotations

import collections
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

import ember.backends.artifact_cache as artifact_cache
from ember.backends.aot_eager import aot_eager
from ember.backends.artifact_cache import ArtifactDir, code_fingerprint
from ember.backends.autotune_choice import choose, settled
from ember.backends.autotune_timing import median_seconds, time_candidates, timeable
from ember.backends.autotune_timing import training_run as _training_run
from ember.backends.eager import eager
from ember.backends.inductor import inductor
from ember.backends.inductor_settings import InductorSettings, inductor_settings
from ember.backends.registry import register_backend, register_backend_configuration
from ember.exc import EmberError
from ember.progress import stage
from ember.stats import counters
from ember_codegen.cache import content_key

log = logging.getLogger("ember.autotune")
_events = logging.getLogger("ember.events")  # structured events (ember.trace's writer)
LEVEL = "autotune"  # artifact cache level of stored decisions


class AutotuneOptionError(EmberError, ValueError):
    """A bad `options` entry for backend='autotune' (names what is allowed)."""


@dataclass(frozen=True)
class Candidate:
    name: str
    backend: Callable  # backend(gm, example_inputs, **kwargs) -> callable
    #: device types of graphs it compiles; None: any
    devices: frozenset[str] | None = None
    #: inductor settings it forces (None: not an inductor candidate)
    inductor: dict[str, Any] | None = None
    on_request: bool = False  # only when the user asked for it

    def applies(self, devices: set[str]) -> bool:
        return self.devices is None or devices <= self.devices

    def compiler(self, base: InductorSettings) -> Callable:
        if self.inductor is None:
            return self.backend
        return functools.partial(self.backend, settings=replace(base, **self.inductor))


_CUDA = frozenset({"cuda"})
CANDIDATES: dict[str, Candidate] = {
    c.name: c
    for c in (
        Candidate("eager", eager),
        Candidate("aot_eager", aot_eager),
        Candidate(
            "inductor",
            inductor,
            frozenset({"cpu", "cuda"}),
            {"cudagraphs": False, "autotune": False},
        ),
        Candidate("inductor-cudagraphs", inductor, _CUDA, {"cudagraphs": True, "autotune": False}),
        Candidate(
            "max-autotune", inductor, _CUDA, {"cudagraphs": True, "autotune": True}, on_request=True
        ),
    )
}
#: chosen when the inputs cannot be run (fake or meta tensors, e.g. under torch.compile)
UNTIMED_CHOICE = "inductor"


@dataclass(frozen=True)
class AutotunePlan:
    candidates: tuple[str, ...] | None = None  # None: every candidate not only on request
    requested: tuple[str, ...] = ()  # on-request candidates asked for by mode/options
    time_budget_s: float = 1.0
    warmup: int = 2
    min_runs: int = 5
    max_runs: int = 50
    margin: float = 0.0
    inductor: InductorSettings = field(default_factory=InductorSettings)

    def applicable(self, devices: set[str]) -> list[str]:
        names = self.candidates or [
            n for n, c in CANDIDATES.items() if not c.on_request or n in self.requested
        ]
        return [n for n in CANDIDATES if n in names and CANDIDATES[n].applies(devices)]

    def describe(self) -> str:
        return f"margin={self.margin} inductor=({self.inductor.describe()})"


@dataclass
class Decision:
    """One graph's choice: what `last_decisions()` returns and the compile report reads."""

    graph: str  # key prefix and op count
    choice: str
    source: str  # "timed", "stored" or "untimed: <why>"
    training: bool
    timings_ms: dict[str, float]  # median milliseconds per call, by candidate
    runs: dict[str, int]  # timed rounds per candidate
    failures: dict[str, str]  # candidates dropped, with their error
    compile_s: dict[str, float]  # seconds each candidate took to compile
    raced_out: dict[str, str] = field(default_factory=dict)  # clearly slower: why
    evidence: dict[str, str] = field(default_factory=dict)  # "eager vs inductor": the test


_decisions: collections.deque[Decision] = collections.deque(maxlen=256)


def last_decisions() -> list[Decision]:
    """The decisions of the most recent graphs (at most 256), oldest first."""
    return list(_decisions)


def clear_decisions() -> None:
    _decisions.clear()


# -- options ------------------------------------------------------------------------------

_PLAN_OPTIONS = {
    "time_budget_s": float,
    "warmup": int,
    "min_runs": int,
    "max_runs": int,
    "margin": float,
}


def autotune_plan(mode: str | None = None, options: dict[str, Any] | None = None) -> AutotunePlan:
    """The plan for `ember.compile(backend="autotune", mode=..., options=...)`."""
    options = dict(options or {})
    fields: dict[str, Any] = {}
    for name, kind in _PLAN_OPTIONS.items():
        if name in options:
            fields[name] = _number(name, options.pop(name), kind)
    if "candidates" in options:
        fields["candidates"] = _candidate_names(options.pop("candidates"))
    try:
        settings = inductor_settings(mode, options)  # what is left: inductor's options
    except EmberError as error:
        raise AutotuneOptionError(
            f"{error}; backend='autotune' also takes {['candidates', *_PLAN_OPTIONS]}"
        ) from None
    requested = ("max-autotune",) if settings.autotune else ()
    base = replace(settings, autotune=False, cudagraphs=False)
    return AutotunePlan(requested=requested, inductor=base, **fields)


def _number(name: str, value: Any, kind: type) -> Any:
    minimum = 1 if name in ("min_runs", "max_runs") else 0
    ok = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
    if not ok or value < minimum:
        raise AutotuneOptionError(
            f"autotune option {name!r} must be a{' number' if kind is float else 'n int'} "
            f">= {minimum}, got {value!r}"
        )
    return kind(value)


def _candidate_names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise AutotuneOptionError(
            f"autotune option 'candidates' must be a non-empty list of names from "
            f"{list(CANDIDATES)}, got {value!r}"
        )
    unknown = [v for v in value if v not in CANDIDATES]
    if unknown:
        raise AutotuneOptionError(
            f"unknown autotune candidate(s) {unknown}; allowed: {', '.join(CANDIDATES)}"
        )
    return tuple(dict.fromkeys(value))


# -- the stored decision -------------------------------------------------------------------


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return repr(
            (
                tuple(value.shape),
                value.stride(),
                value.dtype,
                str(value.device),
                value.requires_grad,
            )
        )
    return f"{type(value).__name__}:{value!r}"[:200]


def decision_key(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], names: list[str], plan: AutotunePlan
) -> str:
    code = gm.graph.python_code(root_module="self")
    global_names = sorted(
        f"{n}={getattr(v, '__module__', '')}.{getattr(v, '__qualname__', type(v).__name__)}"
        for n, v in code.globals.items()
    )
    attributes = [
        f"{n.target}={_describe(getattr(gm, str(n.target), None))}"
        for n in gm.graph.nodes
        if n.op == "get_attr"
    ]
    return content_key(
        [
            "ember-autotune",
            code_fingerprint(),
            ",".join(names),
            plan.describe(),
            f"grad={torch.is_grad_enabled()} training={_training_run(example_inputs)}",
            code.src,
            "\n".join(global_names + attributes),
            "\n".join(_describe(v) for v in example_inputs),
        ]
    )


def _store():
    return ArtifactDir(LEVEL) if artifact_cache.enabled() else None


# -- the backend ---------------------------------------------------------------------------


def _devices(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> set[str]:
    values = [*example_inputs, *(n.meta.get("example_value") for n in gm.graph.nodes)]
    found = {
        leaf.device.type
        for v in values
        for leaf in torch.utils._pytree.tree_leaves(v)
        if isinstance(leaf, torch.Tensor)
    }
    found.discard("meta")
    return found or {"cpu"}


@register_backend_configuration("autotune")
def configure_autotune(mode: str | None, options: dict | None) -> Callable:
    return functools.partial(autotune, plan=autotune_plan(mode, options))


@register_backend("autotune", symbolic_sizes=True)
def autotune(
    gm: torch.fx.GraphModule, example_inputs: list[Any], plan: AutotunePlan | None = None
) -> Callable:
    plan = plan or autotune_plan()
    names = plan.applicable(_devices(gm, example_inputs))
    counters["autotune"]["graphs"] += 1
    ops = sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
    key = decision_key(gm, example_inputs, names, plan)
    graph = f"{key[:12]} ({ops} ops)"
    training = _training_run(example_inputs)
    store = _store()
    stored = store.load(key) if store is not None else None
    if stored is not None and stored.get("choice") in names:
        choice = stored["choice"]
        decision = Decision(
            graph, choice, "stored", training, stored.get("timings_ms", {}), {}, {}, {}
        )
        return _keep(decision, _compile(choice, gm, example_inputs, plan))
    untimeable = timeable(example_inputs)
    if untimeable is not None or len(names) == 1:
        choice = names[0] if len(names) == 1 else _fallback_choice(names)
        why = f"untimed: {untimeable or 'one candidate'}"
        decision = Decision(graph, choice, why, training, {}, {}, {}, {})
        return _keep(decision, _compile(choice, gm, example_inputs, plan))

    compiled, failures, compile_s = {}, {}, {}
    for name in names:
        start = time.perf_counter()
        try:
            compiled[name] = _compile(name, gm, example_inputs, plan)
        except Exception as error:  # dropped, logged and counted; the others still compete
            if name == "eager":
                raise
            failures[name] = f"{type(error).__name__}: {error}"
        compile_s[name] = time.perf_counter() - start
    runs_before = _run_counts()
    with stage("autotune timing"):
        timings = time_candidates(
            gm, compiled, example_inputs,
            budget_s=plan.time_budget_s, warmup=plan.warmup,
            min_runs=min(plan.min_runs, plan.max_runs), max_runs=plan.max_runs,
            settled=functools.partial(settled, order=list(CANDIDATES), margin=plan.margin),
        )  # fmt: skip
    _restore_run_counts(runs_before)
    failures.update(timings.failed)
    for name, reason in failures.items():
        counters["autotune"]["candidate_failures"] += 1
        log.warning("autotune: candidate %s dropped for graph %s: %s", name, graph, reason)
    counters["autotune"]["raced_out"] += len(timings.dropped)
    samples = timings.samples
    medians = {name: median_seconds(runs) * 1e3 for name, runs in samples.items()}
    racing = {n: s for n, s in samples.items() if n not in timings.dropped}
    choice, evidence = choose(racing, list(CANDIDATES), plan.margin)
    decision = Decision(
        graph, choice, "timed", training, medians,
        {n: len(r) for n, r in samples.items()}, failures, compile_s, dict(timings.dropped),
        evidence,
    )  # fmt: skip
    counters["autotune"]["timed"] += 1
    if store is not None:
        store.save(key, {"choice": choice, "timings_ms": medians})
    return _keep(decision, compiled[choice])


def _fallback_choice(names: list[str]) -> str:
    return UNTIMED_CHOICE if UNTIMED_CHOICE in names else names[0]


def _compile(name: str, gm: torch.fx.GraphModule, example_inputs: list, plan: AutotunePlan):
    return CANDIDATES[name].compiler(plan.inductor)(gm, example_inputs)


def _keep(decision: Decision, compiled: Callable) -> Callable:
    _decisions.append(decision)
    if 0 < _events.level <= logging.DEBUG:  # for the compile trace, when one is recorded
        _events.debug(
            "autotune", extra={"ember_event": "autotune", "ember_payload": asdict(decision)}
        )
    stats = counters["autotune"]
    stats[f"kept_{decision.choice}"] += 1
    if decision.source == "stored":
        stats["stored"] += 1
    elif decision.source != "timed":
        stats["untimed"] += 1
    timings = ", ".join(f"{n} {ms:.3f} ms" for n, ms in decision.timings_ms.items())
    failed = "".join(f"; {n} failed" for n in decision.failures)
    failed += "".join(f"; {n} raced out" for n in decision.raced_out)
    failed += "".join(f"; {pair}: {why}" for pair, why in decision.evidence.items())
    log.info(
        "autotune graph %s%s: %s -> %s (%s%s)",
        decision.graph, " fwd+bwd" if decision.training else "", timings or "no timings",
        decision.choice, decision.source, failed,
    )  # fmt: skip
    return compiled


def _run_counts() -> dict[tuple[str, str], int]:
    return {
        (group, key): value
        for group, stats in counters.items()
        for key, value in stats.items()
        if key.endswith("_runs")
    }


def _restore_run_counts(before: dict[tuple[str, str], int]) -> None:
    """Timing runs are not the user's: the candidates' run counters go back to before."""
    for group, stats in list(counters.items()):
        if group == "autotune":  # its timing_runs count exactly these runs
            continue
        for key in [k for k in stats if k.endswith("_runs")]:
            value = before.get((group, key), 0)
            if value:
                stats[key] = value
            else:
                del stats[key]
