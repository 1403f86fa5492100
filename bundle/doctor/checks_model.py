"""The model folder holds a loadable checkpoint: config.json, every weight shard, a tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

from bundle.doctor.context import HostContext
from bundle.doctor.core import CheckResult, fail, ok, skip, warn
from bundle.images.model import check_folder, differences_text
from bundle.rules.checkpoint import identify, unsupported_checkpoint

INDEX_NAME = "model.safetensors.index.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tiktoken.model")
_FIX_DOWNLOAD = "download the checkpoint to that folder, or set model.path in bundle.yaml"


def model_files(ctx: HostContext) -> CheckResult:
    if not ctx.model_path:
        return skip("no model path", "pass --model-path or set model.path in bundle.yaml")
    root = Path(ctx.model_path)
    if not root.is_dir():
        return fail(f"model folder {root} does not exist", _FIX_DOWNLOAD, path=str(root))
    config = root / "config.json"
    if not config.is_file():
        return fail(f"{config} is missing: not a Hugging Face checkpoint folder", _FIX_DOWNLOAD, path=str(root))
    try:
        model_type = json.loads(config.read_text()).get("model_type", "unknown")
    except (ValueError, OSError) as exc:
        return fail(f"{config} is not readable JSON: {exc}", "re-download config.json", path=str(root))
    refused = unsupported_checkpoint(config)
    if refused:
        return fail(refused, "download DeepSeek-V4-Flash to that folder, or set model.path in bundle.yaml",
                    path=str(root), model_type=model_type)

    index = root / INDEX_NAME
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, OSError) as exc:
            return fail(f"{index} is unreadable: {exc}", "re-download the index file", path=str(root))
    else:
        shards = sorted(p.name for p in root.glob("*.safetensors"))
        if not shards:
            return fail(f"no *.safetensors weights in {root}", _FIX_DOWNLOAD, path=str(root))
    missing = [s for s in shards if not (root / s).is_file()]
    size = sum((root / s).stat().st_size for s in shards if (root / s).is_file())
    held = identify(root)
    details = {"path": str(root), "model_type": model_type, "shards": len(shards),
               "missing_shards": missing[:20], "bytes": size,
               "checkpoint": held.name if held else None, "dspark_draft": held.draft if held else None}
    if missing:
        return fail(f"{len(missing)} of {len(shards)} weight shards missing (first: {missing[0]})",
                    "finish the download (huggingface-cli download resumes)", **details)
    if not any((root / name).is_file() for name in TOKENIZER_FILES):
        return warn(f"{len(shards)} shards present, but no tokenizer file ({', '.join(TOKENIZER_FILES)})",
                    "download the tokenizer files with the checkpoint", **details)
    pin = ctx.model_pin
    if pin is None or not pin.pinned:
        details["manifest"] = "not pinned in docker/lock.toml [model] (bundle model pin)"
    else:
        differences = check_folder(root, pin)
        if differences:
            return fail(f"{root}: {differences_text(differences, pin)}",
                        "bundle model fetch (downloads exactly the pinned revision), or pin this one: "
                        "bundle model pin --revision SHA", differences=[d.__dict__ for d in differences[:50]],
                        **details)
        details["manifest"] = (f"matches {pin.repo}@{pin.revision[:12]} (sizes; `bundle model check --sha256` "
                               f"hashes the shards)")
    return ok(f"{model_type}: {len(shards)} shards, {size / 1024 ** 3:.1f} GiB, tokenizer present"
              + (f"; {held.describe()}" if held else ""), **details)
