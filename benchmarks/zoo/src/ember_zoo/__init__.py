"""ember_zoo: a small, deterministic zoo of PyTorch models for testing and benchmarking Ember.

Usage::

    import ember_zoo

    case = ember_zoo.build("bert", "tiny", seed=0)
    out = case.run()
    ember_zoo.training_loss(case).backward()
"""

from ember_zoo.registry import (
    SIZES,
    CaseParts,
    UnknownCaseError,
    ZooCase,
    build,
    names,
    output_tensors,
    training_loss,
)

__all__ = [
    "SIZES",
    "CaseParts",
    "UnknownCaseError",
    "ZooCase",
    "build",
    "names",
    "output_tensors",
    "training_loss",
]

__version__ = "0.1.0"
