"""Is the checkpoint in the model folder the model this bundle serves? Read from its config.json.

The bundle's images and kernels serve DeepSeek-V4-Flash. A DeepSeek-V4.1 checkpoint loads in
SGLang 0.5.23 (it maps `DeepseekV41ForCausalLM` onto the V4 class, configs/deepseek_v41.py), but
its layouts (ratio-1/2 compressed layers, top-k 1152, page 32) have no sm_120 kernel: flashinfer
#5323, vLLM #56837. So a V4.1 config.json is refused before weights load, by `bundle validate` /
`bundle launch` (bundle.rules.check) and by doctor's model check, with the same words.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bundle import modes
from bundle.rules import guards

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
    marker = modes.registry().MODEL_MARKER  # a model made for a no-GPU mode: never served on a GPU host
    if config.get(marker):
        return (f"{config_file} is the CPU engine {modes.word()}'s tiny trained model ({marker}: true), "
                f"made for `bundle launch {modes.flag()} engine` only; this bundle serves {EXPECTED_MODEL}: "
                "point model.path at a DeepSeek-V4-Flash checkpoint")
    evidence = v41_evidence(config)
    if not evidence:
        return None
    return (f"{config_file} is a DeepSeek-V4.1 checkpoint ({'; '.join(evidence)}); its layouts have no "
            f"sm_120 kernel in the pinned stack ({guards.cite(guards.V41_CHECKPOINT)}); this bundle serves "
            f"{EXPECTED_MODEL}: point model.path at a DeepSeek-V4-Flash checkpoint")


# ---- which DeepSeek-V4-Flash checkpoint, and whether it carries a DSpark draft ------------------
# SGLang 0.5.23 finds a DSpark draft two ways (arg_groups/speculative_hook.py, _handle_dspark):
# bundled in the target checkpoint, marked by any of these prefixed keys in its config.json
# (speculative/dspark_components/dspark_config.py, checkpoint_bundles_dspark_draft), or as a
# `dspark/` subfolder with its own config.json (_DSPARK_DRAFT_SUBFOLDER). Restated here because the
# driver does not import SGLang (torch); tests/test_contract_defaults.py holds both to the source.
DSPARK_DRAFT_KEYS = ("dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id", "dspark_target_layer_ids")
DSPARK_SUBFOLDER = "dspark"
# SGLang's block size (gamma) when neither the flag nor the draft's config gives one (DEFAULT_DSPARK_GAMMA).
DSPARK_DEFAULT_BLOCK_SIZE = 7
ORIGINAL, V0731 = "DeepSeek-V4-Flash", "DeepSeek-V4-Flash-0731"


def bundles_dspark_draft(config: dict) -> bool:
    """SGLang's checkpoint_bundles_dspark_draft on a config.json read as a dict."""
    return any(config.get(key) is not None for key in DSPARK_DRAFT_KEYS)


@dataclass(frozen=True)
class CheckpointInfo:
    """What a model folder holds, read from its config.json and files."""

    name: str  # DeepSeek-V4-Flash | DeepSeek-V4-Flash-0731 | a V4.1 / other description
    draft: str | None  # "bundled" (config.json's dspark_* keys), "dspark/ subfolder", or None
    block_size: int | None  # the draft's own block size (gamma), when it gives one
    refused: str | None = None  # why it cannot be served here (V4.1), else None

    @property
    def has_draft(self) -> bool:
        return self.draft is not None

    def describe(self) -> str:
        if self.refused:
            return self.name
        if not self.draft:
            return f"{self.name} (no DSpark draft)"
        block = f", block size {self.block_size}" if self.block_size else \
            f", block size not given (SGLang's default: {DSPARK_DEFAULT_BLOCK_SIZE})"
        return f"{self.name} (DSpark draft {self.draft}{block})"


def _read_config(path: Path) -> dict | None:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def identify(folder: Path) -> CheckpointInfo | None:
    """Which checkpoint `folder` holds; None when it has no readable config.json. DeepSeek-V4-Flash-0731
    is the V4-Flash architecture with a DSpark draft shipped with it: the draft tells the two apart."""
    folder = Path(folder)
    config = _read_config(folder / "config.json")
    if config is None:
        return None
    refused = unsupported_checkpoint(folder / "config.json")
    if refused:
        return CheckpointInfo("DeepSeek-V4.1 (refused)", None, None, refused)
    if bundles_dspark_draft(config):
        size = config.get("dspark_block_size")
        return CheckpointInfo(V0731, "bundled", size if isinstance(size, int) else None)
    sub = _read_config(folder / DSPARK_SUBFOLDER / "config.json")
    if (folder / DSPARK_SUBFOLDER / "config.json").is_file():
        # SGLang reads the draft's gamma from its config: dspark_block_size, else block_size
        # (dflash_utils via parse_dspark_draft_config).
        size = (sub or {}).get("dspark_block_size", (sub or {}).get("block_size"))
        return CheckpointInfo(V0731, f"{DSPARK_SUBFOLDER}/ subfolder", size if isinstance(size, int) else None)
    archs = config.get("architectures") or []
    name = ORIGINAL if config.get("model_type") == "deepseek_v4" or "DeepseekV4ForCausalLM" in archs else \
        f"an unknown checkpoint (model_type {config.get('model_type')!r})"
    return CheckpointInfo(name, None, None)
