"""The Triton target's capability record (ember_inductor_ir's ``Target``), declared beside
its op table and registered for CUDA graphs (CPU tensors under TRITON_INTERPRET=1 take the
same record, which is how the GPU's lowering is tested without a GPU)."""

from __future__ import annotations

from ember_inductor_ir import OP_NAMES, ChannelsLastPolicy, CombinePolicy, Target, register_target

from .ops_handler import TritonOpsHandler

#: cuDNN's NHWC kernels: every graph's convolutions, training too, but for the shapes its
#: NHWC kernels run far slower (H200, bf16, tools/gpu/conv_layouts.py): PiT's pooling
#: convolutions (one input channel and two outputs per group) 23-47x, TNT's 3-channel 7x7
#: pixel embedding 2.5x
GPU_CHANNELS_LAST = ChannelsLastPolicy(
    inference=True,
    training=True,
    weight_gradients=True,
    slow_nhwc=frozenset({"channel_multiplier", "image_input"}),
)

#: small independent pointwise kernels launched together (an optimizer step: one kernel per
#: parameter): a launch costs a few microseconds of GPU time and more of the host's, what an
#: H200 takes to read and write 1-4 M float32 points, so only larger kernels launch alone
#: (ResNet-50's largest parameter, 2.4 M points, joins its neighbours). A combined kernel
#: builds in about the time of its parts one after another (AdamW's: 7.0 s for 32 parts,
#: 1.2-1.6 s for 8, on one core), and kernels build side by side (prebuild.py), so one of 32
#: parts was a compile's longest single build (Llama's optimizer: 8.4 s for 5 kernels),
#: and one of 16 still 3.4 s with every other kernel built in 3 s (tools/gpu/compile_profile.py).
#: 8 parts of up to 8 arguments (AdamW's: 4 read, 4 written) fit in 64 pointers; the step
#: launches a few more kernels (Llama's AdamW 10 instead of 5), a few microseconds each.
GPU_COMBINE = CombinePolicy(max_kernels=8, max_args=64, max_numel=1 << 22)

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
        combine=GPU_COMBINE,
        # a GPU recomputes an exp faster than it stores and reloads its float32 value: a
        # persistent row reuses it between passes (TritonOpsHandler.loads_end_at_stores),
        # and a reader in another loop order reads the narrow input instead (ConViT's
        # positional softmax: 157 MB of float32 exponentials a block at batch 64)
        transcendental_op_cost=1,
        # cuBLAS's bf16 kernels for sizes that are not a multiple of 8: Bart's LM head over
        # its odd vocabulary 7.8x slower than on operands padded to 50272 columns
        matmul_alignment_bytes=16,
    )
)

__all__ = ["GPU_CHANNELS_LAST", "GPU_COMBINE", "TRITON_TARGET"]
