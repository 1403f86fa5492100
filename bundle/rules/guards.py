"""The guards: refusals for failures reported on this stack, each with the upstream issue that
explains it. One registry, cited by the rules' messages and read by the documentation site's
generated guards page (docsgen/), so the page and the messages name the same issue."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Guard:
    name: str
    refuses: str  # what `bundle validate` / `launch` refuses
    reason: str  # why: what would happen otherwise
    upstream: tuple[str, ...]  # the issues that report it ("project #number"); empty: the pinned source
    where: str  # the rule that enforces it


BACKEND_NAMES = Guard(
    "backend names",
    "a backend name (from levers, extra_args or a role's env) the pinned SGLang does not accept: the choices "
    "of every option whose name ends in -backend, and for SGLANG_SM120_FLASHMLA_BACKEND the names "
    "flash_mla_sm120.py tells apart (flashinfer, triton) plus torch, so b12x is refused",
    "any other SGLANG_SM120_FLASHMLA_BACKEND value silently runs the slow torch path",
    (), "bundle/rules/backends.py")
V41_CHECKPOINT = Guard(
    "DeepSeek-V4.1 checkpoint",
    "a config.json with model_type deepseek_v41, a DeepseekV41 architecture, ratio-1/2 compressed layers or "
    "index_topk other than 512, in validate, launch and doctor's model check",
    "its layouts have no sm_120 kernel in the pinned stack",
    ("flashinfer #5323", "vLLM #56837"), "bundle/rules/checkpoint.py")
PD_SPECULATIVE = Guard(
    "identical speculative settings in pd",
    "prefill and decode with different speculative settings (extra_args included)",
    "prefill hands decode the draft state of each request's first tokens",
    ("sglang #30461",), "bundle/rules/check.py")
KV_DTYPE = Guard(
    "KV-cache dtype",
    "levers.kv_cache_dtype fp8_e5m2 (the schema's choices are auto, fp8_e4m3, bf16)",
    "SGLang refuses fp8_e5m2 for DeepSeek-V4",
    (), "bundle/config/bundle.schema.json")
DSPARK = Guard(
    "DSpark speculative decoding",
    "levers.speculative: dspark in a disaggregated topology (pd), with DP-attention, or with a checkpoint "
    "that has no DSpark draft (suggesting 0731 or mtp)",
    "the pinned SGLang's DSpark PD path is DeepSeek-V4.1's; DP-attention is blocked with DSpark",
    ("sglang #33083",), "bundle/rules/dspark.py")

GUARDS: tuple[Guard, ...] = (BACKEND_NAMES, V41_CHECKPOINT, PD_SPECULATIVE, KV_DTYPE, DSPARK)


def cite(guard: Guard) -> str:
    """The issues as a message cites them: "sglang #33083", "flashinfer #5323, vLLM #56837"."""
    return ", ".join(guard.upstream)
