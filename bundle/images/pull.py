"""Pull the published worker image by the digest the lock records, and prove it is that image.

Two facts must both hold, else the pulled reference is removed again and nothing is tagged:
- the engine records the image under `<repo>@<published digest>` (what the registry served is the
  manifest the lock names: Docker checks the content against the digest it pulled by);
- its `io.sglang-bundle.lock-hash` label equals this checkout's lock hash (the image was built from
  these pins, not from an older lock whose digest was left in place).
Accepted, it is tagged `<repo>:lock-<hash>` (the lock's image_ref), which is what compose runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from bundle.stack import docker
from bundle.errors import EXIT_CONFIG, EXIT_FAILED, BundleError
from bundle.images.lock import LOCK_HASH_LABEL


@dataclass(frozen=True)
class PullTarget:
    repo: str
    digest: str | None  # sha256:<64 hex>, or None when nothing is published for this lock
    lock_hash: str
    tag_as: str  # the reference compose uses: <repo>:lock-<hash>

    @property
    def ref(self) -> str:
        return f"{self.repo}@{self.digest}"


def target_from_lock(lock) -> PullTarget:
    return PullTarget(repo=lock.image_repo, digest=lock.published_digest, lock_hash=lock.hash,
                      tag_as=lock.image_ref)


def verification_problems(facts: docker.ImageFacts, target: PullTarget) -> list[str]:
    """Why the local image is not the published image of this lock (empty: it is)."""
    problems = []
    if target.ref not in facts.repo_digests:
        seen = ", ".join(facts.repo_digests) or "none"
        problems.append(f"digest: the engine does not record it as {target.ref} (repo digests: {seen})")
    label = facts.labels.get(LOCK_HASH_LABEL)
    if label != target.lock_hash:
        problems.append(f"label {LOCK_HASH_LABEL}: {label!r}, expected {target.lock_hash!r} "
                        "(the image was built from another lock)")
    return problems


def not_published_error(target: PullTarget, lock_path: str) -> BundleError:
    return BundleError(
        f"no published image is recorded for lock {target.lock_hash}: image.published_digest is "
        f"empty in {lock_path}, so there is nothing to pull",
        hint=f"build it here with `make image` (tags {target.tag_as}), or set image.published_digest "
             "to the digest printed when this lock's image was pushed",
        exit_code=EXIT_CONFIG)


def pull_verified(target: PullTarget) -> docker.ImageFacts:
    """Pull `target.ref`, verify it, tag it as `target.tag_as`; on any mismatch remove it and raise."""
    if not target.digest:
        raise not_published_error(target, "the lock")
    docker.pull_image(target.ref)
    facts = docker.image_facts(target.ref)
    if facts is None:
        raise BundleError(f"docker pull {target.ref} reported success but the image is not there",
                          exit_code=EXIT_FAILED, hint="run `docker pull` by hand and check its output")
    problems = verification_problems(facts, target)
    if problems:
        docker.remove_image_ref(target.ref)
        lines = "\n".join(f"  - {p}" for p in problems)
        raise BundleError(f"refused {target.ref}: it is not the published image of lock "
                          f"{target.lock_hash}; the pulled reference was removed\n{lines}",
                          exit_code=EXIT_FAILED,
                          hint="check image.repo and image.published_digest in docker/lock.toml "
                               "against what was pushed, or build locally with `make image`")
    docker.tag_image(target.ref, target.tag_as)
    return facts
