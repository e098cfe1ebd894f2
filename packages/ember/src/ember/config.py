"""Ember's settings. One explicit object, read where a compile starts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Config:
    cache_size_limit: int = 8  # compiled variants kept per code object before running eagerly
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
