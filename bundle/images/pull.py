"""Pull the published worker image by the digest the lock records, and prove it is that image.

What the release workflow promises, checked in this order; any failure removes the pulled
reference again and tags nothing:
- digest: the engine records the image under `<repo>@<published digest>` (the registry served the
  manifest the lock names: Docker checks the content against the digest it pulled by);
- label: its `io.sglang-bundle.lock-hash` equals this checkout's lock hash (built from these pins);
- signature: cosign verifies the release workflow's keyless signature, where cosign is installed;
  where it is not, the result says NOT CHECKED and the command that would check it (`--require-
  signature` makes that a refusal);
- sbom: /opt/bundle/sbom.cdx.json matches its label and lists exactly the lock's distributions;
- contents: the venv read from inside a container of the image (no network) is the lock's set, so a
  package planted after the SBOM was written is named.
Accepted, it is tagged `<repo>:lock-<hash>` (the lock's image_ref), which is what compose runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bundle import paths
from bundle.errors import BundleError, Failed, InputError
from bundle.images import contents, sbom, signature
from bundle.findings import Level
from bundle.lock import LOCK_HASH_LABEL, Lock
from bundle.stack import engine


@dataclass(frozen=True)
class PullTarget:
    repo: str
    digest: str | None  # sha256:<64 hex>, or None when nothing is published for this lock
    lock_hash: str
    tag_as: str  # the reference compose uses: <repo>:lock-<hash>
    signer: str | None = None  # the release workflow's certificate identity (a regular expression)

    @property
    def ref(self) -> str:
        return f"{self.repo}@{self.digest}"


def target_from_lock(lock: Lock) -> PullTarget:
    return PullTarget(repo=lock.image_repo, digest=lock.published_digest, lock_hash=lock.hash,
                      tag_as=lock.image_ref, signer=lock.data["image"].get("signer") or None)


@dataclass(frozen=True)
class Verified:
    check: str  # digest, label, signature, sbom, contents
    status: str  # "ok", signature.NOT_CHECKED, or "refused"
    detail: str


@dataclass
class PullReport:
    facts: engine.ImageFacts
    checks: list[Verified] = field(default_factory=list)

    @property
    def not_checked(self) -> list[Verified]:
        return [c for c in self.checks if c.status == signature.NOT_CHECKED]


def verification_problems(facts: engine.ImageFacts, target: PullTarget) -> list[str]:
    """Why the local image is not the published image of this lock by its digest and label."""
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
    return InputError(
        f"no published image is recorded for lock {target.lock_hash}: image.published_digest is "
        f"empty in {lock_path}, so there is nothing to pull",
        hint=f"build it here with `make image` (tags {target.tag_as}), or set image.published_digest "
             "to the digest printed when this lock's image was pushed")


def pull_verified(target: PullTarget, lock: Lock, *, root: Path | None = None, require_signature: bool = False,
                  on_progress: Callable[[str], None] | None = None) -> PullReport:
    """Pull `target.ref`, verify it (module docstring), tag it as `target.tag_as`; on any problem
    remove the pulled reference and raise one BundleError listing every problem."""
    if not target.digest:
        raise not_published_error(target, str(lock.path))
    root = root or paths.project_root()
    say = on_progress or (lambda _msg: None)
    say(f"[1/5] pulling {target.ref} ...")
    engine.pull_image(target.ref)
    facts = engine.image_facts(target.ref)
    if facts is None:
        raise Failed(f"docker pull {target.ref} reported success but the image is not there",
                     hint="run `docker pull` by hand and check its output")
    report = PullReport(facts)
    problems = verification_problems(facts, target)
    if not problems:
        report.checks += [Verified("digest", "ok", target.ref),
                          Verified("label", "ok", f"{LOCK_HASH_LABEL}={target.lock_hash}")]
        say("[2/5] signature (cosign) ...")
        problems += _signature(target, report, require_signature)
        say("[3/5] SBOM against the lock ...")
        problems += _sbom(target, facts, lock, root, report)
        say("[4/5] installed set against the lock (a container of the image, no network) ...")
        problems += _contents(target, lock, root, report)
    if problems:
        engine.remove_image_ref(target.ref)
        lines = "\n".join(f"  - {p}" for p in problems)
        raise Failed(f"refused {target.ref}: it is not the published image of lock "
                     f"{target.lock_hash}; the pulled reference was removed\n{lines}",
                     hint="check image.repo and image.published_digest in docker/lock.toml "
                          "against what was pushed, or build locally with `make image`")
    say(f"[5/5] tagging {target.tag_as}")
    engine.tag_image(target.ref, target.tag_as)
    return report


def _signature(target: PullTarget, report: PullReport, required: bool) -> list[str]:
    check = signature.verify(target.ref, target.signer)
    if check.status == signature.FAILED:
        return [f"signature: {check.detail}"]
    if check.status == signature.NOT_CHECKED and required:
        return [f"signature: {check.detail} (--require-signature)"]
    report.checks.append(Verified("signature", "ok" if check.status == signature.VERIFIED else check.status,
                                  check.detail))
    return []


def _sbom(target: PullTarget, facts: engine.ImageFacts, lock: Lock, root: Path, report: PullReport) -> list[str]:
    data = engine.file_from_image(target.ref, sbom.SBOM_PATH)
    summary, problems = sbom.problems(data, facts.labels.get(sbom.SBOM_LABEL), lock, root)
    if not problems:
        report.checks.append(Verified("sbom", "ok", f"{summary}; equals the lock"))
    return problems


def _contents(target: PullTarget, lock: Lock, root: Path, report: PullReport) -> list[str]:
    installed = contents.read_image(target.ref)
    found = contents.findings(installed, lock, root, image=target.ref)
    fails = [f"contents: {f.what}" for f in found if f.level == Level.FAIL]
    if not fails:
        venv = [d for d in (installed.get("packages") or {}).get("distributions", []) if d["site"].startswith("/opt/venv/")]
        warns = [f.what for f in found if f.level == Level.WARN]
        report.checks.append(Verified("contents", "ok", f"{len(venv)} distributions in /opt/venv equal the lock"
                                      + (f" (warnings: {'; '.join(warns)})" if warns else "")))
    return fails
