"""Write the published digest into docker/lock.toml, every other byte (comments, order) kept.

The release workflow calls this (`bundle lock set-digest`) and proposes the change as a pull
request; it never writes anything else, so a review sees one line change.
"""

from __future__ import annotations

import re
from pathlib import Path

from bundle.errors import InputError
from bundle.lock import Lock, load_lock
from bundle.images.reference import DIGEST

_TABLE = re.compile(r"^\s*\[([^\]]+)\]\s*(#.*)?$")
_KEY = re.compile(r'^(\s*published_digest\s*=\s*)"[^"]*"(.*)$')


def set_published_digest(path: Path, digest: str) -> tuple[Lock, bool]:
    """Record `digest` as `[image] published_digest` of the lock at `path`; returns the reloaded
    lock and whether the file changed. The lock hash cannot change ([image] is not hashed)."""
    if not DIGEST.match(digest):
        raise InputError(f"{digest!r} is not a digest (sha256:<64 hex>)",
                         hint="pass the digest `bundle push` printed (digest=sha256:...)")
    before = load_lock(path)
    lines = Path(path).read_text().splitlines(keepends=True)
    table, done = None, False
    for i, line in enumerate(lines):
        header = _TABLE.match(line)
        if header:
            table = header.group(1).strip()
            continue
        match = _KEY.match(line.rstrip("\n"))
        if table == "image" and match:
            end = "\n" if line.endswith("\n") else ""
            lines[i] = f'{match.group(1)}"{digest}"{match.group(2)}{end}'
            done = True
            break
    if not done:
        raise InputError(f"{path}: [image] has no published_digest line to set",
                         hint='add `published_digest = ""` under [image] (see docs/release.md)')
    text = "".join(lines)
    changed = text != Path(path).read_text()
    Path(path).write_text(text)
    after = load_lock(path)
    assert after.hash == before.hash, "the [image] table is outside the lock hash"
    return after, changed
