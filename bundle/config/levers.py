"""The named presets of bundle.yaml's `levers:` section, as SGLang flags and environment.

Users pick `speculative: mtp` or `sparse_mla: bundle`; this module alone knows which flags and
variables that means for the pinned SGLang (each flag is checked against its parser snapshot).
Every lever's default is SGLang 0.5.23's own choice; the one the bundle decides itself,
pcie_safe_collectives, is decided per host (`Collectives`), never assumed for every host.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bundle.config.model import DSpark, Levers

# DeepSeek's MTP head drives speculative decoding through SGLang's EAGLE path (`NEXTN` is its alias:
# speculative_hook._resolve_speculative_algorithm_alias). In 0.5.23 that is spec v2, the overlap
# scheduler, for top-k 1 (the SGLANG_ENABLE_SPEC_V2 switch of older releases is gone), and
# deepseek_v4_hook asserts EAGLE with top-k 1 for DeepSeek-V4.
# mtp: 3 steps / top-k 1 / 4 draft tokens, what SGLang itself picks for DeepSeek models when no step
# count is given (speculative_hook._auto_choose_speculative_params) and what its docs show.
MTP_ARGS = ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
# mtp-light: one pass of the checkpoint's single MTP layer (num_nextn_predict_layers: 1), 2 tokens
# verified per step: less draft and verify work per step, for higher concurrency.
MTP_LIGHT_ARGS = ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "1",
                  "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2"]
# dspark: the DSpark draft shipped with DeepSeek-V4-Flash-0731. Only the algorithm is given; the rest
# is SGLang's own choice (speculative_hook._handle_dspark): the draft path defaults to the checkpoint
# (bundled draft) or its dspark/ subfolder, steps 1 and top-k 1 (the only values DSpark runs), the
# block size gamma from the draft's config (else DEFAULT_DSPARK_GAMMA, 7), draft tokens gamma + 1.
# levers.dspark adds the block size and calibration files (dspark_args). SGLang names no lighter
# DSpark preset: a smaller levers.dspark.block_size is the lighter setting.
DSPARK_ARGS = ["--speculative-algorithm", "DSPARK"]
DSPARK_BLOCK_FLAG = "--speculative-dspark-block-size"
DSPARK_SPS_FLAG = "--speculative-dspark-sps-table-path"
DSPARK_STS_FLAG = "--speculative-dspark-confidence-sts-path"
MODEL_MOUNT = "/model"  # where compose mounts model.path in every server (compose/*.yaml)
SPECULATIVE_ARGS = {"none": [], "mtp": MTP_ARGS, "mtp-light": MTP_LIGHT_ARGS, "dspark": DSPARK_ARGS}
EAGER_ARGS = ["--cuda-graph-backend-decode", "disabled", "--cuda-graph-backend-prefill", "disabled"]
PCIE_SAFE_ARGS = ["--disable-custom-all-reduce"]
# Every flag a lever can set: extra_args may not set them a second time.
LEVER_FLAGS = {a for a in MTP_ARGS + MTP_LIGHT_ARGS + DSPARK_ARGS + EAGER_ARGS + PCIE_SAFE_ARGS if a.startswith("--")} | {
    DSPARK_BLOCK_FLAG, DSPARK_SPS_FLAG, DSPARK_STS_FLAG}


@dataclass(frozen=True)
class Collectives:
    """Whether the servers run PCIe-safe collectives (NCCL_P2P_DISABLE=1, no custom all-reduce), and why.

    source: "forced" (levers.pcie_safe_collectives true/false), "probe" (auto, decided from this
    host's P2P and NCCL probes), "fallback" (auto, nothing could be probed: the safe setting).
    """

    pcie_safe: bool
    source: str
    reason: str
    evidence: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"pcie_safe": self.pcie_safe, "source": self.source, "reason": self.reason,
                "evidence": self.evidence}


def unprobed_collectives(levers: Levers, why: str = "not probed here (`bundle launch` probes the host)") -> Collectives:
    """The decision without a probe: the forced value, or for auto the safe setting, saying why."""
    value = levers.pcie_safe_collectives
    if value == "auto":
        return Collectives(True, "fallback", f"levers.pcie_safe_collectives: auto, {why}: the safe "
                                             f"setting (NCCL_P2P_DISABLE=1, --disable-custom-all-reduce)")
    return Collectives(bool(value), "forced", f"levers.pcie_safe_collectives: {str(value).lower()}")


def server_args(levers: Levers, collectives: Collectives | None = None) -> list[str]:
    """Flags every SGLang server of the deployment gets from the levers (beyond the compose file's)."""
    collectives = collectives or unprobed_collectives(levers)
    args: list[str] = list(SPECULATIVE_ARGS[levers.speculative])
    if levers.speculative == "dspark":
        args += dspark_args(levers.dspark)
    if not levers.cuda_graphs:
        args += EAGER_ARGS
    if collectives.pcie_safe:
        args += PCIE_SAFE_ARGS
    return args


def dspark_args(dspark: DSpark) -> list[str]:
    """levers.dspark as flags: only the keys given (None is SGLang's own choice)."""
    args = []
    if dspark.block_size is not None:
        args += [DSPARK_BLOCK_FLAG, str(dspark.block_size)]
    if dspark.sps_table:
        args += [DSPARK_SPS_FLAG, f"{MODEL_MOUNT}/{dspark.sps_table}"]
    if dspark.confidence_sts:
        args += [DSPARK_STS_FLAG, f"{MODEL_MOUNT}/{dspark.confidence_sts}"]
    return args


def environment(levers: Levers, collectives: Collectives | None = None) -> dict[str, str]:
    """Compose variables the levers set (see compose/*.yaml)."""
    collectives = collectives or unprobed_collectives(levers)
    overlay = levers.sparse_mla == "bundle"
    return {
        "KV_CACHE_DTYPE": levers.kv_cache_dtype,
        "MOE_RUNNER_BACKEND": levers.moe_runner,
        # The bundle's kernel replaces SGLang's Triton sparse-MLA decode, so SGLang must be on its
        # Triton path for the overlay's patch to be the one that runs.
        "SM120_SPARSE_MLA_BACKEND": "triton" if overlay else levers.sparse_mla,
        "BUNDLE_SPARSE_MLA_OVERLAY": "1" if overlay else "0",
        "NCCL_P2P_DISABLE": "1" if collectives.pcie_safe else "0",
    }
