"""`bundle pull`'s refusals that need no image contents, against the real engine and a real
registry (Debian's docker-registry on 127.0.0.1, which Docker treats as insecure-allowed): images
are built FROM the local Debian root stand-in, pushed, removed, then pulled back by digest. The
whole verified pull (signature, SBOM, contents) is tests/e2e/test_release_e2e.py."""

from __future__ import annotations

import subprocess
import uuid

import pytest

from bundle.cli import main
from bundle.errors import BundleError
from bundle.images import pull
from bundle.lock import LOCK_HASH_LABEL, load_lock
from bundle.stack import engine
from tests.release_fixtures import copy_lock, ensure_base_image, serve_registry, sh


@pytest.fixture(scope="module")
def base_image() -> str:
    return ensure_base_image()


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    yield from serve_registry(tmp_path_factory.mktemp("registry"))


def publish(registry: str, base: str, label: str | None) -> tuple[str, str]:
    """Build a tiny image (unique content) with the lock-hash label, push it, forget it locally.
    Returns (repo, digest) as a lock would record them."""
    repo = f"{registry}/bundle-test/worker-{uuid.uuid4().hex[:8]}"
    lines = [f"FROM {base}", f"RUN echo {uuid.uuid4().hex} > /nonce"]
    if label is not None:
        lines.append(f"LABEL {LOCK_HASH_LABEL}={label}")
    sh("docker", "build", "-q", "-t", f"{repo}:pushed", "-", input="\n".join(lines) + "\n")
    sh("docker", "push", f"{repo}:pushed")
    digests = sh("docker", "image", "inspect", "--format", "{{join .RepoDigests \"\\n\"}}", f"{repo}:pushed")
    digest = next(d for d in digests.split() if d.startswith(repo + "@")).split("@", 1)[1]
    sh("docker", "image", "rm", f"{repo}:pushed")
    assert engine.image_facts(f"{repo}@{digest}") is None  # the pull below really pulls
    return repo, digest


def cleanup(*refs: str) -> None:
    for ref in refs:
        subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True, check=False)


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_an_image_built_from_another_lock_is_refused_and_removed(registry, base_image):
    repo, digest = publish(registry, base_image, "ffffffffffff")
    target = pull.PullTarget(repo=repo, digest=digest, lock_hash="0123456789ab", tag_as=f"{repo}:lock-0123456789ab")
    try:
        with pytest.raises(BundleError) as error:
            pull.pull_verified(target, load_lock())
        message = str(error.value)
        assert "refused" in message and "'ffffffffffff', expected '0123456789ab'" in message
        assert "removed" in message
        assert engine.image_facts(target.ref) is None
        assert engine.image_facts(target.tag_as) is None
    finally:
        cleanup(target.tag_as, target.ref)


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_an_image_without_the_label_is_refused(registry, base_image):
    repo, digest = publish(registry, base_image, None)
    target = pull.PullTarget(repo=repo, digest=digest, lock_hash="0123456789ab", tag_as=f"{repo}:lock-x")
    try:
        with pytest.raises(BundleError, match="None, expected '0123456789ab'"):
            pull.pull_verified(target, load_lock())
        assert engine.image_facts(target.ref) is None
    finally:
        cleanup(target.ref)


@pytest.mark.docker
@pytest.mark.timeout(120)
def test_a_local_image_that_no_registry_recorded_fails_the_digest_check(base_image):
    tag = f"bundle-test/local-{uuid.uuid4().hex[:8]}:t"
    sh("docker", "build", "-q", "-t", tag, "-",
       input=f"FROM {base_image}\nLABEL {LOCK_HASH_LABEL}=0123456789ab\n")
    try:
        facts = engine.image_facts(tag)
        target = pull.PullTarget(repo="registry.example/sglang", digest="sha256:" + "a" * 64,
                                 lock_hash="0123456789ab", tag_as="x")
        problems = pull.verification_problems(facts, target)
        assert len(problems) == 1 and problems[0].startswith("digest:")
    finally:
        cleanup(tag)


@pytest.mark.docker
@pytest.mark.timeout(120)
def test_a_digest_the_registry_does_not_have_is_a_clear_pull_error(registry):
    target = pull.PullTarget(repo=f"{registry}/bundle-test/none", digest="sha256:" + "0" * 64,
                             lock_hash="0123456789ab", tag_as="x")
    with pytest.raises(BundleError, match="docker pull .* failed"):
        pull.pull_verified(target, load_lock())


def test_with_no_published_digest_pull_says_so_and_how_to_build(tmp_path, capsys):
    lock_path = copy_lock(tmp_path, digest="")
    code = main(["pull", "--lock", str(lock_path)])
    err = capsys.readouterr().err
    assert code == 3
    lock = load_lock(lock_path)
    assert f"no published image is recorded for lock {lock.hash}" in err
    assert "make image" in err and lock.image_ref in err
