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
  tokens = steps + 1; the draft's MoE runner defaults to the target's;
- speculative_hook.py `_handle_dspark`: DSPARK takes its draft from the checkpoint (config.json's
  dspark_* keys: the draft path is the model path) or its dspark/ subfolder, else stops the server
  (DSparkRefused); steps 1, top-k 1; gamma = --speculative-dspark-block-size, else the draft's
  dspark_block_size, else 7; draft tokens = gamma + 1.

Only DeepseekV4ForCausalLM checkpoints are resolved (the simulated model folder says it is one);
the fields changed are reported next to the info, so a rehearsal's attestation can say where a
value came from.
"""

from __future__ import annotations

from pathlib import Path

DSV4_ARCH = "DeepseekV4ForCausalLM"
# SGLang's marks of a bundled DSpark draft (dspark_config.checkpoint_bundles_dspark_draft), its draft
# subfolder and default gamma. The rehearsal image carries bundle/rehearsal/simulator only, so they are restated
# here; tests/test_contract_defaults.py holds them (and bundle/rules/checkpoint.py's) to the source.
DSPARK_DRAFT_KEYS = ("dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id", "dspark_target_layer_ids")
DSPARK_SUBFOLDER = "dspark"
DSPARK_DEFAULT_BLOCK_SIZE = 7


class DSparkRefused(ValueError):
    """What SGLang raises at start for DSPARK without a draft (the simulator exits with it too)."""


def _dspark(out: dict, model_config: dict, decide) -> None:
    if out.get("speculative_draft_model_path") is None:
        model_path = str(out.get("model_path") or "")
        if any(model_config.get(key) is not None for key in DSPARK_DRAFT_KEYS):
            decide("speculative_draft_model_path", model_path)
        elif model_path and (Path(model_path) / DSPARK_SUBFOLDER / "config.json").is_file():
            decide("speculative_draft_model_path", str(Path(model_path) / DSPARK_SUBFOLDER))
        else:
            raise DSparkRefused("DSpark dense speculative decoding requires setting --speculative-draft-model-path.")
    decide("speculative_num_steps", 1)
    decide("speculative_eagle_topk", 1)
    gamma = out.get("speculative_dspark_block_size")
    if gamma is None:
        gamma = model_config.get("dspark_block_size") or DSPARK_DEFAULT_BLOCK_SIZE
    decide("speculative_num_draft_tokens", int(gamma) + 1)


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
    if algorithm and str(algorithm).upper() == "DSPARK":
        decide("speculative_algorithm", "DSPARK")
        _dspark(out, model_config, decide)
    elif algorithm:
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
