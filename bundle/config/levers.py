"""The named presets of bundle.yaml's `levers:` section, as SGLang flags and environment.

Users pick `speculative: mtp` or `sparse_mla: bundle`; this module alone knows which flags and
variables that means for the pinned SGLang (each flag is checked against its parser snapshot).
"""

from __future__ import annotations

from bundle.config.model import Levers

# DeepSeek's MTP head drives speculative decoding through SGLang's NEXTN algorithm (an EAGLE
# variant); 3 steps / 4 draft tokens is SGLang's documented setting for DeepSeek models.
MTP_ARGS = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
EAGER_ARGS = ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]
PCIE_SAFE_ARGS = ["--disable-custom-all-reduce"]


def server_args(levers: Levers) -> list[str]:
    """Flags every SGLang server of the deployment gets from the levers (beyond the compose file's)."""
    args: list[str] = []
    if levers.speculative == "mtp":
        args += MTP_ARGS
    if not levers.cuda_graphs:
        args += EAGER_ARGS
    if levers.pcie_safe_collectives:
        args += PCIE_SAFE_ARGS
    return args


def environment(levers: Levers) -> dict[str, str]:
    """Compose variables the levers set (see compose/*.yaml)."""
    overlay = levers.sparse_mla == "bundle"
    return {
        "KV_CACHE_DTYPE": levers.kv_cache_dtype,
        "MOE_RUNNER_BACKEND": levers.moe_runner,
        # The bundle's kernel replaces SGLang's Triton sparse-MLA decode, so SGLang must be on its
        # Triton path for the overlay's patch to be the one that runs.
        "SM120_SPARSE_MLA_BACKEND": "triton" if overlay else levers.sparse_mla,
        "BUNDLE_SPARSE_MLA_OVERLAY": "1" if overlay else "0",
        "NCCL_P2P_DISABLE": "1" if levers.pcie_safe_collectives else "0",
    }
