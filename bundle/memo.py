"""Remembered passes of pure, deterministic checks, so that a quick command does not redo them.

`bundle validate` must answer in about the time `docker compose config` takes, but two of its checks
are slow to set up: jsonschema takes a fifth of a second to import, and rebuilding SGLang's parser
(532 options) tens of milliseconds. Both are pure functions of their inputs (the schema and the
document; the parser snapshot and the command line), so a pass is remembered under a digest of
every input and the check is skipped when the same inputs come again. Only passes are remembered:
a bad input is always checked, and reported, in full.

The same holds for parsing the files every command reads (the embedded defaults, the compose files,
the lock): importing PyYAML and tomllib and parsing costs about a third of a quick `bundle validate`,
and a parse is a pure function of the text. `parsed()` keeps a parse's result as JSON under a digest of
its kind and text; only a result that comes back from JSON equal to itself is kept (no dates, no
non-string keys), and a text that does not parse is never kept, so its error is always reported.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sglang-bundle"


def memo_dir() -> Path:
    """One empty file per remembered pass: $XDG_CACHE_HOME (or ~/.cache)/sglang-bundle/passed/."""
    return _cache_root() / "passed"


def parsed_dir() -> Path:
    """One JSON file per remembered parse: $XDG_CACHE_HOME (or ~/.cache)/sglang-bundle/parsed/."""
    return _cache_root() / "parsed"


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


def parsed(kind: str, text: str, parse: Callable[[], object]):
    """`parse()`'s result for `text`, remembered across processes (see the module's docstring). `parse`
    raises on a bad text; nothing is remembered then."""
    digest = key(kind, text)
    if digest is None:  # a text that is not a str: never remembered
        return parse()
    path = parsed_dir() / f"{digest}.json"
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        pass  # not remembered yet (or a torn file): parse
    value = parse()
    try:
        dumped = json.dumps(value, separators=(",", ":"))
        if json.loads(dumped) != value:
            return value  # JSON would change it (a tuple, a non-string key): never kept
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: a reader in another process sees all of it or nothing.
        temporary = path.with_name(f"{digest}.{os.getpid()}.tmp")
        temporary.write_text(dumped)
        os.replace(temporary, path)
    except (TypeError, ValueError, OSError):  # not JSON (a date), or a read-only home: parsed each time
        pass
    return value
