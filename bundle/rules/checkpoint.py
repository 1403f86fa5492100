"""Is the checkpoint in the model folder the model this bundle serves? Read from its config.json.

The bundle's images and kernels serve DeepSeek-V4-Flash. A DeepSeek-V4.1 checkpoint loads in
SGLang 0.5.23 (it maps `DeepseekV41ForCausalLM` onto the V4 class, configs/deepseek_v41.py), but
its layouts (ratio-1/2 compressed layers, top-k 1152, page 32) have no sm_120 kernel: flashinfer
#5323, vLLM #56837. So a V4.1 config.json is refused before weights load, by `bundle validate` /
`bundle launch` (bundle.rules.check) and by doctor's model check, with the same words.
"""

from __future__ import annotations

import json
from pathlib import Path

# config.json key of the CPU engine rehearsal's model (bundle/images/rehearsal_model.py): never served on a GPU host.
REHEARSAL_ONLY_KEY = "sglang_bundle_rehearsal_only"
EXPECTED_MODEL = "DeepSeek-V4-Flash (config.json: model_type deepseek_v4, architectures DeepseekV4ForCausalLM)"
V41_MODEL_TYPES = {"deepseek_v41", "deepseek_v41_text"}
V41_ARCHITECTURE_MARK = "DeepseekV41"  # SGLang's own test (entrypoints/openai/chat_encoding.py)
# The V4.1 layouts: compressed layers of ratio 1 and 2 ("the native V4 config rejects 1/2",
# configs/deepseek_v41.py) and the wider top-k of its indexer. V4-Flash: ratios 0/4/128, top-k 512.
V41_COMPRESS_RATIOS = {1, 2}
V4_INDEX_TOPK = 512


def v41_evidence(config: dict) -> list[str]:
    """What in a config.json says DeepSeek-V4.1 (empty when nothing does). A V4.1 config may carry
    its text model under text_config; both levels are read."""
    found = []
    levels = [("", config)]
    if isinstance(config.get("text_config"), dict):
        levels.append(("text_config.", config["text_config"]))
    for prefix, level in levels:
        model_type = level.get("model_type")
        if model_type in V41_MODEL_TYPES:
            found.append(f"{prefix}model_type is {model_type}")
        archs = level.get("architectures") or []
        for arch in archs if isinstance(archs, list) else []:
            if V41_ARCHITECTURE_MARK in str(arch):
                found.append(f"{prefix}architectures names {arch}")
        ratios = level.get("compress_ratios")
        if isinstance(ratios, list):
            odd = sorted({r for r in ratios if r in V41_COMPRESS_RATIOS})
            if odd:
                found.append(f"{prefix}compress_ratios has ratio {'/'.join(map(str, odd))} layers (V4.1's layout)")
        topk = level.get("index_topk")
        if isinstance(topk, int) and topk != V4_INDEX_TOPK:
            found.append(f"{prefix}index_topk is {topk} (V4-Flash: {V4_INDEX_TOPK})")
    return found


def unsupported_checkpoint(config_file: Path) -> str | None:
    """Why the checkpoint behind `config_file` cannot be served here, or None. An unreadable file
    is not judged here (doctor's model check and SGLang report that themselves)."""
    try:
        config = json.loads(Path(config_file).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    if config.get(REHEARSAL_ONLY_KEY):
        return (f"{config_file} is the CPU engine rehearsal's tiny trained model ({REHEARSAL_ONLY_KEY}: true), "
                f"made for `bundle launch --rehearsal engine` only; this bundle serves {EXPECTED_MODEL}: "
                "point model.path at a DeepSeek-V4-Flash checkpoint")
    evidence = v41_evidence(config)
    if not evidence:
        return None
    return (f"{config_file} is a DeepSeek-V4.1 checkpoint ({'; '.join(evidence)}); its layouts have no "
            f"sm_120 kernel in the pinned stack (flashinfer #5323, vLLM #56837); this bundle serves "
            f"{EXPECTED_MODEL}: point model.path at a DeepSeek-V4-Flash checkpoint")
