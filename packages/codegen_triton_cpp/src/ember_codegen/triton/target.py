"""The Triton target's capability record (ember_inductor_ir's ``Target``), declared beside
its op table and registered for CUDA graphs (CPU tensors under TRITON_INTERPRET=1 take the
same record, which is how the GPU's lowering is tested without a GPU)."""

from __future__ import annotations

from ember_inductor_ir import OP_NAMES, ChannelsLastPolicy, Target, register_target

from .ops_handler import TritonOpsHandler

#: cuDNN's NHWC kernels: every graph's convolutions, training too
GPU_CHANNELS_LAST = ChannelsLastPolicy(inference=True, training=True, weight_gradients=True)

TRITON_TARGET = register_target(
    Target(
        name="triton",
        device_type="cuda",
        ops=frozenset(name for name in OP_NAMES if TritonOpsHandler.implements(name)),
        decompositions=TritonOpsHandler.DECOMPOSITIONS,
        symbolic_sizes=True,
        float_scalar_args=True,  # a float t.item() read on the host: a float argument
        # matmuls may become templates with their epilogues fused, and GPU memory comes from
        # a caching allocator without first-touch costs: no library rewrites
        out_variant_prims=frozenset(),
        fold_matmul_epilogues=False,
        batch_step_matmuls=False,
        cat_extern_inputs=None,
        narrow_stores=True,  # bf16-exact float32 buffers stored as bf16
        conv_bias_in_kernels=True,  # cuDNN's bias is an extra pass over the output
        channels_last=GPU_CHANNELS_LAST,
    )
)

__all__ = ["GPU_CHANNELS_LAST", "TRITON_TARGET"]
