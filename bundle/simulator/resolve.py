"""The part of SGLang 0.5.23's argument resolution that /server_info shows and the bundle attests,
restated for DeepSeek-V4-Flash on an sm_120 GPU (the host a rehearsal stands in for).

A real server answers /server_info with `ServerArgs.resolved_dict()`: what `auto` and the unset
fields became after its resolution pipeline. That pipeline needs the GPU (platform checks) and the
checkpoint (a probe of the expert weights' dtype), so the simulator cannot run it; it restates the
decisions instead, each from the file that makes it:

- model_overrides/deepseek_v4.py: attention_backend dsv4, page_size 256, swa_full_tokens_ratio
  0.1, and --moe-runner-backend auto -> flashinfer_mxfp4 for FP4 experts on sm_120 with no
  all-to-all backend (DeepSeek-V4-Flash ships FP4 experts);
- overrides.py `_deepseek_v4_kv_cache_dtype`: --kv-cache-dtype auto -> fp8_e4m3;
- deepseek_v4_hook.py: --dsv4-attn-backend auto -> flashmla (flashmla_mega is V4.1 on sm_100 only);
- speculative_hook.py: NEXTN -> EAGLE; unset steps -> (3, 1, 4) for DeepSeek; top-k 1 -> draft
  tokens = steps + 1; the draft's MoE runner defaults to the target's.

Only DeepseekV4ForCausalLM checkpoints are resolved (the simulated model folder says it is one);
the fields changed are reported next to the info, so a rehearsal's attestation can say where a
value came from.
"""

from __future__ import annotations

DSV4_ARCH = "DeepseekV4ForCausalLM"


def resolve_like_sglang(fields: dict, model_config: dict) -> tuple[dict, dict]:
    """(fields as SGLang would report them, {field: [asked, resolved]} for each one changed)."""
    archs = model_config.get("architectures") or []
    if DSV4_ARCH not in archs[:1]:
        return fields, {}
    out = dict(fields)

    def decide(name, value):
        out[name] = value

    if out.get("attention_backend") is None:
        decide("attention_backend", "dsv4")
    decide("page_size", 256)
    if out.get("swa_full_tokens_ratio") is None:
        decide("swa_full_tokens_ratio", 0.1)
    if out.get("moe_runner_backend", "auto") == "auto" and out.get("moe_a2a_backend", "none") == "none":
        decide("moe_runner_backend", "flashinfer_mxfp4")
    if out.get("kv_cache_dtype", "auto") == "auto":
        decide("kv_cache_dtype", "fp8_e4m3")
    if out.get("dsv4_attn_backend", "auto") == "auto":
        decide("dsv4_attn_backend", "flashmla")
    algorithm = out.get("speculative_algorithm")
    if algorithm:
        algorithm = str(algorithm).upper()
        decide("speculative_algorithm", "EAGLE" if algorithm in ("NEXTN", "EAGLE") else algorithm)
        if out.get("speculative_num_steps") is None:
            decide("speculative_num_steps", 3)
            decide("speculative_eagle_topk", 1)
            decide("speculative_num_draft_tokens", 4)
        if out.get("speculative_eagle_topk") == 1:
            decide("speculative_num_draft_tokens", int(out["speculative_num_steps"]) + 1)
        if out.get("speculative_moe_runner_backend") is None:
            decide("speculative_moe_runner_backend", out.get("moe_runner_backend"))
    changed = {k: [fields.get(k), v] for k, v in out.items() if fields.get(k) != v}
    return out, changed
