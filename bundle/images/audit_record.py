"""Where `bundle audit` keeps its reports (runs/audit/lock-<hash>/<time>.json, latest.json) and the
one reader `bundle validate` uses: standard library only, so validate stays fast."""

from __future__ import annotations

import json
import time
from pathlib import Path

from bundle import paths


def folder(lock_hash: str) -> Path:
    return paths.runs_dir() / "audit" / f"lock-{lock_hash}"


def save(lock_hash: str, text: str) -> Path:
    """Write one report and point latest.json at it."""
    where = folder(lock_hash)
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(text + "\n")
    latest = where / "latest.json"
    latest.unlink(missing_ok=True)
    latest.symlink_to(path.name)
    return path


def latest_predicted(lock_hash: str, config_name: str) -> tuple[Path, dict] | None:
    """The predicted choices of the last audit of an image of this lock with this config, if any."""
    latest = folder(lock_hash) / "latest.json"
    try:
        report = json.loads(latest.read_text())
    except (OSError, ValueError):
        return None
    if report.get("config") != config_name or not report.get("predicted"):
        return None
    return latest.resolve(), report["predicted"]
