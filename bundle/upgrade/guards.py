"""Facts a release's source gives about the project's guards, read from its unpacked wheel:

- SGLANG_SM120_FLASHMLA_BACKEND: the names flash_mla_sm120.py compares the variable with (every other
  value silently takes the torch path); bundle/rules/backends.py accepts exactly those plus "torch".
- The V4.1 refusal (bundle/rules/checkpoint.py): the model types by which the release knows a
  DeepSeek-V4.1 checkpoint; the refusal holds while they are the ones the guard looks for.
"""

from __future__ import annotations

import ast
from pathlib import Path

from bundle.rules import backends, checkpoint

FLASHMLA_SOURCE = "sglang/" + backends.SM120_FLASHMLA_SOURCE.removeprefix("sglang/")
CONFIGS = "sglang/srt/configs"


def flashmla_names(source: str) -> list[str]:
    """The string constants the backend variable is compared with (`_sm120_default_backend == "x"`)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and "backend" in node.left.id:
            found |= {c.value for c in node.comparators if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return sorted(found)


def v41_model_types(configs: Path) -> list[str]:
    """Every `model_type = "deepseek_v41..."` string constant under sglang/srt/configs."""
    found = set()
    for path in sorted(configs.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("deepseek_v41"):
                found.add(node.value)
    return sorted(found)


def facts(site: Path) -> dict:
    source = site / FLASHMLA_SOURCE
    configs = site / CONFIGS
    return {
        "sm120_flashmla": {"source": FLASHMLA_SOURCE, "present": source.is_file(),
                           "compared": flashmla_names(source.read_text()) if source.is_file() else []},
        "v41": {"source": CONFIGS, "model_types": v41_model_types(configs) if configs.is_dir() else []},
    }


def judge(new: dict) -> list[dict]:
    """[{guard, holds, what, where}] for the new release's facts."""
    out = []
    fm = new["sm120_flashmla"]
    accepted = set(backends.SM120_FLASHMLA_VALUES) - {"torch"}
    holds = fm["present"] and set(fm["compared"]) == accepted
    out.append({"guard": f"{backends.SM120_FLASHMLA_ENV} names", "holds": holds,
                "what": (f"{fm['source']} tells apart {', '.join(fm['compared'])} (+ torch fallback), as "
                         f"bundle/rules/backends.py accepts" if holds else
                         f"{fm['source']} " + ("is gone" if not fm["present"] else
                                               f"now tells apart {', '.join(fm['compared']) or 'nothing'}; "
                                               f"the bundle accepts {', '.join(sorted(accepted))}")),
                "where": "bundle/rules/backends.py"})
    types = set(new["v41"]["model_types"])
    missing = sorted(checkpoint.V41_MODEL_TYPES - types) if types else sorted(checkpoint.V41_MODEL_TYPES)
    holds = "deepseek_v41" in types
    out.append({"guard": "DeepSeek-V4.1 refusal", "holds": holds,
                "what": (f"the release knows V4.1 as model_type {', '.join(sorted(types))}; the refusal matches "
                         f"{', '.join(sorted(checkpoint.V41_MODEL_TYPES))}"
                         + (f" ({', '.join(missing)} not in this release's configs)" if missing and holds else "")
                         if holds else "the release no longer names a deepseek_v41 model type: re-read how it "
                                       "recognises V4.1 checkpoints"),
                "where": "bundle/rules/checkpoint.py"})
    return out
