"""Push this lock's runtime image to `[image] repo` and learn the digest the registry recorded.

Nothing is pushed unless the image is this lock's (its lock-hash label) and carries its SBOM (the
file and the label that names its sha256): what a pull will verify is checked before the push.
The digest comes from the engine's RepoDigests after the push: the registry's own answer.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from bundle.errors import Failed, NotFound
from bundle.lock import LOCK_HASH_LABEL, Lock
from bundle.images.reference import registry_of
from bundle.images.sbom import SBOM_LABEL, SBOM_PATH


@dataclass(frozen=True)
class PushPlan:
    source: str  # the local image to push (what `bundle build` tagged, or --image)
    tag: str  # <repo>:lock-<hash>, the name it is pushed under
    repo: str
    registry: str  # what `docker login` needs
    lock_hash: str

    def outputs(self) -> dict[str, str]:
        return {"repo": self.repo, "registry": self.registry, "tag": self.tag, "lock_hash": self.lock_hash}


@dataclass(frozen=True)
class Published:
    plan: PushPlan
    digest: str
    sbom_sha256: str

    @property
    def ref(self) -> str:
        return f"{self.plan.repo}@{self.digest}"

    def outputs(self) -> dict[str, str]:
        return {**self.plan.outputs(), "digest": self.digest, "ref": self.ref, "sbom_sha256": self.sbom_sha256}


def plan_push(lock: Lock, source: str | None = None) -> PushPlan:
    return PushPlan(source=source or lock.image_ref, tag=lock.image_ref, repo=lock.image_repo,
                    registry=registry_of(lock.image_repo), lock_hash=lock.hash)


def check_pushable(plan: PushPlan) -> bytes:
    """The image's SBOM bytes, once the image is proven this lock's with its SBOM; else a BundleError."""
    from bundle.stack import engine

    facts = engine.image_facts(plan.source)
    if facts is None:
        raise NotFound(f"image {plan.source} is not here, so there is nothing to push",
                       hint="build it first: `bundle build` (or name another with --image REF)")
    label = facts.labels.get(LOCK_HASH_LABEL)
    if label != plan.lock_hash:
        raise Failed(f"{plan.source} was built from lock {label or 'unknown'}, docker/lock.toml is "
                     f"{plan.lock_hash}: refusing to publish it as this lock's image",
                     hint="rebuild from this lock: `bundle build`")
    sbom = engine.file_from_image(plan.source, SBOM_PATH)
    sbom_label = facts.labels.get(SBOM_LABEL)
    if sbom is None or not sbom_label:
        raise Failed(f"{plan.source} has no SBOM ({SBOM_PATH} and its {SBOM_LABEL} label): a release "
                     f"publishes one",
                     hint="build without --no-sbom: `bundle build`")
    if hashlib.sha256(sbom).hexdigest() != sbom_label:
        raise Failed(f"{plan.source}: {SBOM_PATH} does not match its {SBOM_LABEL} label",
                     hint="rebuild the runtime layer: bundle build --layer runtime")
    return sbom


def push(plan: PushPlan, *, sbom_out: Path | None = None) -> Published:
    from bundle.stack import engine

    sbom = check_pushable(plan)
    if plan.source != plan.tag:
        engine.tag_image(plan.source, plan.tag)
    engine.push_image(plan.tag)
    facts = engine.image_facts(plan.tag)
    digests = [d.split("@", 1)[1] for d in (facts.repo_digests if facts else ()) if d.startswith(plan.repo + "@")]
    if not digests:
        raise Failed(f"docker push {plan.tag} succeeded but the engine records no digest for {plan.repo}",
                     hint="run `docker push` by hand and read the digest it prints")
    if sbom_out is not None:
        sbom_out.parent.mkdir(parents=True, exist_ok=True)
        sbom_out.write_bytes(sbom)
    return Published(plan=plan, digest=digests[0], sbom_sha256=hashlib.sha256(sbom).hexdigest())


def write_outputs(path: Path, values: dict[str, str]) -> None:
    """Append KEY=VALUE lines (GitHub Actions' $GITHUB_OUTPUT format; any file elsewhere)."""
    with open(path, "a", encoding="utf-8") as handle:
        for key, value in values.items():
            handle.write(f"{key}={value}\n")
