"""PullRequest -> this lock's published worker image pulled by digest and verified (digest, label,
signature, SBOM, contents), or refused."""

from __future__ import annotations

from dataclasses import dataclass

from bundle.images.pull import PullReport, PullTarget, not_published_error, pull_verified, target_from_lock
from bundle.lock import load_lock
from bundle.reporter import Reporter, plain
from bundle.stack import engine


@dataclass(frozen=True)
class PullRequest:
    lock: str | None = None  # the lock's path (None: docker/lock.toml)
    require_signature: bool = False  # refuse an image whose signature cannot be verified


@dataclass(frozen=True)
class Pulled:
    target: PullTarget
    report: PullReport  # each check's verdict, and what was not checked


def pull(request: PullRequest, progress: Reporter) -> Pulled:
    """Pull and verify; a refusal (or nothing published for this lock) is a BundleError."""
    lock = load_lock(request.lock)
    target = target_from_lock(lock)
    if not target.digest:
        raise not_published_error(target, str(lock.path))
    engine.require_engine()
    report = pull_verified(target, lock, require_signature=request.require_signature, on_progress=plain(progress))
    return Pulled(target, report)
