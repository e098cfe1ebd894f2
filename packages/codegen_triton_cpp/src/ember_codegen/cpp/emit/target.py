"""The C++ target's capability record (ember_inductor_ir's ``Target``), declared beside its
op table and registered for CPU graphs: what the loop IR may hand this code generator and
where it should lower to library calls instead of loops."""

from __future__ import annotations

from ember_inductor_ir import (
    OP_NAMES,
    OUT_VARIANT_PRIMS,
    ChannelsLastPolicy,
    Target,
    register_target,
)

from .ops_handler import CppOpsHandler

#: CPU training stays NCHW (but for weight-only gradients): the cnn training step measured
#: 1.47x slower channels-last (docs/performance.md), its batch-norm statistics (float64 sums,
#: two loop segments per kernel) walking NHWC data one channel at a time, which the column
#: lanes (one float32 segment) do not take. oneDNN's weight gradient of the cnn's first
#: convolution (3 input channels) took 5.3-5.6 ms a step from NCHW data and 1.4-2.1 ms from
#: NHWC (torch.compile's layout).
CPU_CHANNELS_LAST = ChannelsLastPolicy(inference=True, training=False, weight_gradients=True)

#: A cat of this many inputs or more is a library copy (aten's cat into planned storage) of
#: the realized inputs: as a loop body it is a chain of one masked load per input for every
#: element, which g++ does not vectorize (a stack of 32 steps ran 1.4 ms for 1 MB).
CAT_EXTERN_INPUTS = 8

CPP_TARGET = register_target(
    Target(
        name="cpp",
        device_type="cpu",
        ops=frozenset(name for name in OP_NAMES if CppOpsHandler.implements(name)),
        decompositions=CppOpsHandler.DECOMPOSITIONS,
        symbolic_sizes=True,
        float_scalar_args=True,  # a float t.item() read on the host: a double argument
        # library results written into planned storage: a library-allocated result is
        # fresh memory on every call, first touched (page faults) by the library
        out_variant_prims=OUT_VARIANT_PRIMS,
        fold_matmul_epilogues=True,
        batch_step_matmuls=True,
        cat_extern_inputs=CAT_EXTERN_INPUTS,
        narrow_stores=True,  # bf16-exact float32 buffers stored as bf16
        channels_last=CPU_CHANNELS_LAST,
    )
)

__all__ = ["CAT_EXTERN_INPUTS", "CPP_TARGET", "CPU_CHANNELS_LAST"]
