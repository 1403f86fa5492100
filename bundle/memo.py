"""Remembered passes of pure, deterministic checks, so that a quick command does not redo them.

`bundle validate` must answer in about the time `docker compose config` takes, but two of its checks
are slow to set up: jsonschema takes a fifth of a second to import, and rebuilding SGLang's parser
(532 options) tens of milliseconds. Both are pure functions of their inputs (the schema and the
document; the parser snapshot and the command line), so a pass is remembered under a digest of
every input and the check is skipped when the same inputs come again. Only passes are remembered:
a bad input is always checked, and reported, in full.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def memo_dir() -> Path:
    """One empty file per remembered pass: $XDG_CACHE_HOME (or ~/.cache)/sglang-bundle/passed/."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sglang-bundle" / "passed"


def key(kind: str, *inputs) -> str | None:
    """A digest of the check's name and every input; None when an input is not JSON (never remembered)."""
    try:
        text = json.dumps([kind, *inputs], sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def passed(digest: str | None) -> bool:
    return digest is not None and (memo_dir() / digest).is_file()


def remember(digest: str | None) -> None:
    if digest is None:
        return
    try:
        folder = memo_dir()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / digest).touch()
    except OSError:  # a read-only home: the check simply runs every time
        pass
