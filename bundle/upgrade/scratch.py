"""A scratch copy of the project whose lock pins a new version: the working lock is never touched.

The copy holds its own docker/ (lock.toml edited, docker/requirements/ re-resolved by `make lock`'s
own code) and links to everything else of the project (compose/, kernels/, bundle/ ...), so `bundle
build --standin` and `bundle audit --standin` run in it unchanged with BUNDLE_HOME pointing there:
the same Dockerfiles and layer keys (an unchanged base layer is reused, not rebuilt).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from packaging.utils import canonicalize_name

from bundle.errors import InputError
from bundle.lock import Lock, load_lock
from bundle.images.requirements import compile_locks

_PIN_LINE = re.compile(r'^(?P<name>[A-Za-z0-9._-]+)\s*=\s*"(?P<value>[^"]*)"')


def table_pins(text: str, table: str) -> dict[str, str]:
    """key -> value of every `key = "value"` line of one [table] of the lock's text."""
    out, current = {}, None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            current = stripped.strip("[]").strip()
            continue
        m = _PIN_LINE.match(stripped)
        if m and current == table:
            out[m.group("name")] = m.group("value")
    return out


def edit_pins(text: str, table: str, changes: dict[str, str]) -> str:
    """The lock's text with `key = "value"` replaced in [table] (comments and layout kept); a
    BundleError for a key the table does not hold."""
    lines, current, done = text.splitlines(keepends=True), None, set()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("["):
            current = stripped.strip("[]").strip()
            continue
        m = _PIN_LINE.match(stripped)
        if m and current == table and m.group("name") in changes:
            key = m.group("name")
            lines[i] = line.replace(f'"{m.group("value")}"', f'"{changes[key]}"', 1)
            done.add(key)
    missing = sorted(set(changes) - done)
    if missing:
        raise InputError(f"docker/lock.toml: [{table}] has no {', '.join(missing)}",
                         hint=f"name a pin the lock holds: {', '.join(sorted(table_pins(text, table)))}")
    return "".join(lines)


def pins_to_take(lock_pins: dict[str, str], release: str, version: str,
                 release_requires: dict[str, str]) -> dict[str, str]:
    """The [python] changes for `release==version`: the release itself, and every other pin of the lock
    that the release requires exactly (SGLang's torch, sglang-kernel, flashinfer-python, tilelang)."""
    changes = {}
    for key, old in lock_pins.items():
        name = canonicalize_name(key)
        if name == canonicalize_name(release):
            changes[key] = version
        elif name in release_requires and release_requires[name] != old:
            changes[key] = release_requires[name]
    return changes


def make_scratch(root: Path, lock: Lock, dest: Path, text: str) -> Path:
    """dest/ as a copy of the project with docker/lock.toml = `text`; returns the new lock path."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for entry in sorted(root.iterdir()):
        if entry.name in ("docker", "runs", ".cache", ".git") or entry.name.startswith(".venv"):
            continue
        (dest / entry.name).symlink_to(entry.resolve(), target_is_directory=entry.is_dir())
    shutil.copytree(lock.path.parent, dest / "docker", symlinks=True)
    new_lock = dest / "docker" / "lock.toml"
    new_lock.write_text(text)
    return new_lock


def resolve(lock_path: Path, overrides: dict[str, str] | None = None, keep_from: Path | None = None) -> Lock:
    """`make lock` in the scratch copy (keeping the versions of the hashed locks in `keep_from` where the
    new pins allow them): hashed requirements for every layer, then the lock reloaded (its hash covers
    them)."""
    compile_locks(load_lock(lock_path), overrides=overrides, keep_from=keep_from)
    return load_lock(lock_path)


def preferences(req_dir: Path, release_names: set[str], into: Path) -> Path:
    """The old hashed locks without the packages the old release pinned exactly (its own choices,
    void once it changes, overrides included): what `resolve(keep_from=...)` should keep."""
    from bundle.images.requirements import _REQ_LINE, normalise

    into.mkdir(parents=True, exist_ok=True)
    for txt in sorted(req_dir.glob("*.txt")):
        kept, dropping = [], False
        for line in txt.read_text().splitlines():
            m = _REQ_LINE.match(line)
            if m:
                dropping = normalise(m.group(1)) in release_names
            elif not line.startswith("    "):
                dropping = False
            if not dropping:
                kept.append(line)
        (into / txt.name).write_text("\n".join(kept) + "\n")
    return into
