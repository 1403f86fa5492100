"""SetDigestRequest -> the published digest recorded in the lock ([image] published_digest, one line;
the lock hash does not change)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundle.images.lock_edit import set_published_digest
from bundle.lock import Lock, default_lock_path


@dataclass(frozen=True)
class SetDigestRequest:
    digest: str  # sha256:<64 hex>
    lock: str | None = None  # the lock's path (None: docker/lock.toml)


@dataclass(frozen=True)
class DigestSet:
    lock: Lock  # as it is now
    digest: str
    changed: bool  # False: it held this digest already


def set_digest(request: SetDigestRequest) -> DigestSet:
    lock, changed = set_published_digest(Path(request.lock) if request.lock else default_lock_path(), request.digest)
    return DigestSet(lock, request.digest, changed)
