"""What a profiled kernel (or CPU op) is: its family in a decode step and the library it came from,
read from its own name and from what launched it (the Python frames and ops around its launch, as
torch's profiler records them with SGLang's default `with_stack`).

The library is what the name or the launching frames say: NCCL's kernels are `ncclDevKernel_*`,
FlashInfer's and TileLang's carry their namespace or are launched from their Python packages,
Triton's are launched from `triton/runtime/jit.py`, cuBLAS's are `nvjet_*` / `*gemm*` (sm90_xmma ...),
CUTLASS's say `cutlass`, PyTorch's own `at::native::` (GPU) or `aten::` (CPU). So a fallback is named:
an MoE GEMM that attestation expected from FlashInfer's CUTLASS module and that ran as Triton or torch
says so in the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MOE, DENSE_GEMM, ATTENTION, COLLECTIVES, ELEMENTWISE, SAMPLING, OTHER = (
    "MoE GEMM", "dense GEMM", "attention and indexer", "collectives", "norms/elementwise", "sampling", "other")
IDLE = "idle gaps"
FAMILIES = (MOE, DENSE_GEMM, ATTENTION, COLLECTIVES, ELEMENTWISE, SAMPLING, OTHER)


@dataclass(frozen=True)
class Kind:
    family: str
    library: str


def _any(words: str) -> re.Pattern:
    return re.compile(words, re.IGNORECASE)


# A kernel's own name, strong enough to decide its family wherever it was launched.
_NAME_FAMILY = (
    (COLLECTIVES, _any(r"nccl|all_?reduce|all_?gather|reduce_?scatter|cross_device_reduce|c10d::|gloo:|broadcast")),
    (MOE, _any(r"moe|expert|grouped_?gemm|group_gemm")),
    (ATTENTION, _any(r"attn|attention|flash_?mla|\bmla|fmha|sdpa|flash_fprop|flash_fwd|paged|indexer|mqa_logits|"
                     r"batchdecode|batchprefill|decode_with|prefill_with")),
    (SAMPLING, _any(r"sampl|multinomial")),
)
# The frames and ops around the launch, innermost first: SGLang's layers live in files that say
# what they are (layers/moe/, layers/attention/, layers/sampler.py, layernorm.py, communication_op.py).
_CONTEXT_FAMILY = (
    (COLLECTIVES, _any(r"all_?reduce|all_?gather|reduce_?scatter|nccl|communication_op|custom_all_reduce")),
    (SAMPLING, _any(r"sampler|sampling")),
    (MOE, _any(r"moe|expert")),
    (ATTENTION, _any(r"attention|attn|indexer|\bmla\b|flash_mla|rotary")),
    (ELEMENTWISE, _any(r"layernorm|rms_?norm|\bnorm\b|activation")),
)
# Names that say what kind of work, once the context has not said more.
_GEMM = _any(r"gemm|nvjet|xmma|matmul|cutlass|aten::(mm|addmm|bmm|linear|baddbmm)\b|_mm\b|wgmma|hgemm|sgemm")
_ELEMENTWISE = _any(r"elementwise|norm|reduce_kernel|copy|fill|cat|silu|gelu|act_and_mul|add|mul|rsqrt|pow|"
                    r"softmax|topk|sort|scan|where|index|gather|scatter|memcpy|memset|embedding|rope|rotary|"
                    r"aten::|at::native|cub::")

_LIBRARY_NAME = (
    ("NCCL", _any(r"nccl")),
    ("FlashInfer", _any(r"flashinfer")),
    ("TileLang", _any(r"tilelang|\btl::")),
    ("CUTLASS", _any(r"cutlass")),
    ("cuBLAS", _any(r"nvjet|xmma|cublas|^(sm\d+|ampere|hopper|blackwell)_\w*gemm")),
    ("cuDNN", _any(r"cudnn")),
    ("sgl-kernel", _any(r"sgl_kernel|sglang|cross_device_reduce")),
    ("Triton", _any(r"^triton_")),  # inductor's generated kernels
    ("PyTorch", _any(r"at::native|at_cuda_detail|^aten::|^void at::")),
    ("CUDA copies", _any(r"^mem(cpy|set)\b")),  # the trace's gpu_memcpy / gpu_memset: "Memcpy DtoH ..."
)
# Python packages in the launching frames: the library that launched a kernel whose name is its own.
_LIBRARY_FRAME = (
    ("Triton", _any(r"triton/runtime/|triton/backends/")),
    ("TileLang", _any(r"tilelang/")),
    ("FlashInfer", _any(r"flashinfer/")),
    ("sgl-kernel", _any(r"sgl_kernel/")),
    ("DeepGEMM", _any(r"deep_gemm/")),
)


def classify(name: str, context: tuple[str, ...] = ()) -> Kind:
    """`name`: the kernel's (or CPU op's) own name; `context`: the names of the ops and Python frames
    around its launch, innermost first."""
    return Kind(_family(name, context), library(name, context))


def _family(name: str, context: tuple[str, ...]) -> str:
    for family, pattern in _NAME_FAMILY:
        if pattern.search(name):
            return family
    around = next((family for frame in context for family, pattern in _CONTEXT_FAMILY if pattern.search(frame)),
                  None)
    if _GEMM.search(name):
        # a GEMM is the MoE's inside the MoE layer; elsewhere (attention's projections too) a dense one
        return MOE if around == MOE else DENSE_GEMM
    if around is not None:
        return around
    if _ELEMENTWISE.search(name):
        return ELEMENTWISE
    return OTHER


def library(name: str, context: tuple[str, ...] = ()) -> str:
    for lib, pattern in _LIBRARY_NAME:
        if pattern.search(name):
            return lib
    for frame in context:
        for lib, pattern in _LIBRARY_FRAME:
            if pattern.search(frame):
                return lib
    return "other"
