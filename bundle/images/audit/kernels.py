"""Which native libraries each choice the server makes needs on sm_120, read from the pinned
SGLang 0.5.23 and sglang-kernel 0.4.10 (paths relative to site-packages). A choice whose kernels
are compiled at first use (Triton, FlashInfer's JIT, tilelang) needs no prebuilt library; a choice
listed here needs at least one of its libraries to carry code that runs on compute capability 12.0.

The audit FAILs when a choice the config leads to needs a library none of whose files can run on
sm_120, and says which lever made the choice.
"""

from __future__ import annotations

# sgl_kernel/load_utils.py loads ops from sm90/ on capability 9.0 and from sm100/ on anything
# else, sm_120 included; every sgl_kernel entry point goes through that common_ops.
COMMON_OPS = "sgl_kernel/sm100/common_ops.abi3.so"

# (field of the resolved ServerArgs or the predicted sparse-MLA backend, value) -> libraries
NEEDS: dict[tuple[str, str], tuple[str, ...]] = {
    # sgl_kernel.flash_attn (FlashAttention 3) is flash_ops.
    ("attention_backend", "fa3"): ("sgl_kernel/flash_ops.abi3.so",),
    ("prefill_attention_backend", "fa3"): ("sgl_kernel/flash_ops.abi3.so",),
    ("decode_attention_backend", "fa3"): ("sgl_kernel/flash_ops.abi3.so",),
    # sgl_kernel.flash_mla (FlashMLA) is flashmla_ops; the flash_mla package is DeepSeek's own build.
    ("attention_backend", "flashmla"): ("sgl_kernel/flashmla_ops.abi3.so",),
    ("decode_attention_backend", "flashmla"): ("sgl_kernel/flashmla_ops.abi3.so",),
    # The MoE runners built into sglang-kernel (moe_wna16_marlin_gemm, cutlass_fp4_group_mm).
    ("moe_runner_backend", "marlin"): (COMMON_OPS,),
    ("moe_runner_backend", "cutlass"): (COMMON_OPS,),
    # DeepEP's all-to-all (deep_ep/_C) for expert parallelism.
    ("moe_a2a_backend", "deepep"): ("deep_ep/_C.cpython-312-x86_64-linux-gnu.so",),
}

# What every server loads whatever the levers say: torch's CUDA kernels, NCCL, sglang-kernel's ops.
ALWAYS: tuple[tuple[str, str], ...] = (
    ("torch", "torch/lib/libtorch_cuda.so"),
    ("nccl", "nvidia/nccl/lib/libnccl.so.2"),
    ("sglang-kernel", COMMON_OPS),
)


def choice_libraries() -> tuple[str, ...]:
    """Every library a choice or every server can need (relative to site-packages): all the levers
    check reads, whatever the choices turn out to be."""
    return tuple(sorted({lib for libs in NEEDS.values() for lib in libs} | {lib for _, lib in ALWAYS}))


# Which bundle.yaml lever leads to each resolved field (for the finding's fix line).
LEVER_OF = {
    "moe_runner_backend": "levers.moe_runner",
    "attention_backend": "<role>.extra_args --attention-backend",
    "prefill_attention_backend": "<role>.extra_args --prefill-attention-backend",
    "decode_attention_backend": "<role>.extra_args --decode-attention-backend",
    "moe_a2a_backend": "<role>.extra_args --moe-a2a-backend",
    "sm120_sparse_mla_backend": "levers.sparse_mla",
}
