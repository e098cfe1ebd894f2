"""Ember's settings. One explicit object, read where a compile starts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Config:
    # compiled variants kept per code object before running eagerly; a value above
    # CACHE_LIMIT_MAX (sys.maxsize, torch's "no limit") means no limit in practice: it is
    # clamped to CACHE_LIMIT_MAX, the most the frame hook keeps (frame_cache_limit)
    cache_size_limit: int = 8
    suppress_errors: bool = False  # a failing backend falls back to eager with a warning
    verbose: bool = False  # graph-break logs show the whole chain of inlined calls
    # nonzero, masked_select, boolean-mask indexing, unique: with symbolic shapes on, an
    # unbacked size symbol keeps the graph going; off, these ops are a graph break.
    capture_dynamic_output_shape_ops: bool = False
    # Tensor.item() and .tolist(): on, the value stays in the graph as an unbacked symbolic
    # int/float/bool (arithmetic, sizes and torch._check on it are traced; a branch on it is
    # a graph break); off (as torch.compile), reading a tensor's value is a graph break.
    capture_scalar_outputs: bool = False
    # nn.Parameter inputs keep their sizes static under automatic dynamic shapes
    # (dynamic=None): a parameter of another size recompiles instead of becoming symbolic.
    # Under dynamic=True parameters are always static; False: they follow the other inputs.
    static_parameter_shapes: bool = False
    # inputs whose ints and tensor dims are symbolic from the first compile, named as guard
    # reports show them: comma-separated exact names or regexes matched at the start
    # ("L['x'], L\\['y.*'\\]"); "L['x']:0" names dim 0 only. A name wins over dynamic=False
    # and static_parameter_shapes (ember_bytecode_tracer/named_sources.py)
    dynamic_sources: str = ""
    # a compile running longer than 2 s draws one status line on stderr when it is a
    # terminal (stage, kernels built, elapsed; ember/progress.py); False: never
    progress: bool = True
    # a folder for the structured compile trace (ember.trace; EMBER_TRACE_DIR sets it too)
    trace_dir: str | None = None
    # graphs traced inside a DDP forward compile as one piece per DDP bucket, so each
    # bucket's all-reduce starts while backward still runs (ember/distributed/ddp_split.py)
    optimize_ddp: bool = True

    def __setattr__(self, name: str, value) -> None:
        if name not in type(self).__dataclass_fields__:
            raise AttributeError(
                f"ember.config has no setting {name!r}; settings: {', '.join(type(self).__dataclass_fields__)}"
            )
        super().__setattr__(name, value)


config = Config()

#: the most compiled variants the frame hook keeps per code object
CACHE_LIMIT_MAX = 1_000_000


def frame_cache_limit(limit: int) -> int:
    """The frame hook's limit for `config.cache_size_limit`: a larger one (sys.maxsize is
    how torch.compile's users say "no limit") is clamped to CACHE_LIMIT_MAX; below 1 raises."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"ember.config.cache_size_limit must be an int >= 1, got {limit!r}")
    return min(limit, CACHE_LIMIT_MAX)
