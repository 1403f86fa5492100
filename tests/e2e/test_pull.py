"""`bundle pull` against the real engine and a real registry (Debian's docker-registry, the
distribution registry, on 127.0.0.1, which Docker treats as insecure-allowed): images are built
FROM the local Debian root stand-in, pushed, removed, then pulled back by digest."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from bundle.stack import docker
from bundle.images import pull
from bundle.cli import main
from bundle.errors import BundleError
from bundle.images.lock import LOCK_HASH_LABEL, load_lock

BASE_IMAGE = "sglang-bundle/debian-root:bookworm"
REPO_ROOT = Path(__file__).resolve().parents[2]


def sh(*args: str, input: str | None = None) -> str:
    proc = subprocess.run(args, input=input, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _missing(what: str) -> None:
    if os.environ.get("BUNDLE_REQUIRE_DOCKER") == "1":
        pytest.fail(f"{what} (BUNDLE_REQUIRE_DOCKER=1)")
    pytest.skip(what)


@pytest.fixture(scope="module")
def base_image() -> str:
    if subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True, check=False).returncode != 0:
        sh("bash", str(REPO_ROOT / "docker" / "debian-root.sh"), BASE_IMAGE)
    return BASE_IMAGE


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    binary = shutil.which("docker-registry") or shutil.which("registry")
    if binary is None:
        _missing("no registry binary: apt-get install docker-registry")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = tmp_path_factory.mktemp("registry")
    config = root / "config.yml"
    config.write_text(f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {root}/data\n"
                      f"  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n")
    address = f"127.0.0.1:{port}"
    with open(root / "registry.log", "w") as log:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://{address}/v2/", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"registry did not start: {(root / 'registry.log').read_text()}")
            time.sleep(0.2)
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=20)


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
    assert docker.image_facts(f"{repo}@{digest}") is None  # the pull below really pulls
    return repo, digest


def cleanup(*refs: str) -> None:
    for ref in refs:
        subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True, check=False)


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_the_published_image_of_this_lock_is_pulled_verified_and_tagged(registry, base_image):
    lock_hash = "0123456789ab"
    repo, digest = publish(registry, base_image, lock_hash)
    target = pull.PullTarget(repo=repo, digest=digest, lock_hash=lock_hash, tag_as=f"{repo}:lock-{lock_hash}")
    try:
        facts = pull.pull_verified(target)
        assert f"{repo}@{digest}" in facts.repo_digests
        tagged = docker.image_facts(target.tag_as)
        assert tagged is not None and tagged.id == facts.id
        assert tagged.labels[LOCK_HASH_LABEL] == lock_hash
    finally:
        cleanup(target.tag_as, target.ref)


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_an_image_built_from_another_lock_is_refused_and_removed(registry, base_image):
    repo, digest = publish(registry, base_image, "ffffffffffff")
    target = pull.PullTarget(repo=repo, digest=digest, lock_hash="0123456789ab", tag_as=f"{repo}:lock-0123456789ab")
    try:
        with pytest.raises(BundleError) as error:
            pull.pull_verified(target)
        message = str(error.value)
        assert "refused" in message and "'ffffffffffff', expected '0123456789ab'" in message
        assert "removed" in message
        assert docker.image_facts(target.ref) is None
        assert docker.image_facts(target.tag_as) is None
    finally:
        cleanup(target.tag_as, target.ref)


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_an_image_without_the_label_is_refused(registry, base_image):
    repo, digest = publish(registry, base_image, None)
    target = pull.PullTarget(repo=repo, digest=digest, lock_hash="0123456789ab", tag_as=f"{repo}:lock-x")
    try:
        with pytest.raises(BundleError, match="None, expected '0123456789ab'"):
            pull.pull_verified(target)
        assert docker.image_facts(target.ref) is None
    finally:
        cleanup(target.ref)


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_a_local_image_that_no_registry_recorded_fails_the_digest_check(base_image):
    tag = f"bundle-test/local-{uuid.uuid4().hex[:8]}:t"
    sh("docker", "build", "-q", "-t", tag, "-",
       input=f"FROM {base_image}\nLABEL {LOCK_HASH_LABEL}=0123456789ab\n")
    try:
        facts = docker.image_facts(tag)
        target = pull.PullTarget(repo="registry.example/sglang", digest="sha256:" + "a" * 64,
                                 lock_hash="0123456789ab", tag_as="x")
        problems = pull.verification_problems(facts, target)
        assert len(problems) == 1 and problems[0].startswith("digest:")
    finally:
        cleanup(tag)


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_a_digest_the_registry_does_not_have_is_a_clear_pull_error(registry):
    target = pull.PullTarget(repo=f"{registry}/bundle-test/none", digest="sha256:" + "0" * 64,
                             lock_hash="0123456789ab", tag_as="x")
    with pytest.raises(BundleError, match="docker pull .* failed"):
        pull.pull_verified(target)


def copy_lock(tmp_path: Path, repo: str | None = None, digest: str = "") -> Path:
    lock_dir = tmp_path / "docker"
    shutil.copytree(REPO_ROOT / "docker" / "requirements", lock_dir / "requirements") \
        if (REPO_ROOT / "docker" / "requirements").is_dir() else lock_dir.mkdir()
    text = (REPO_ROOT / "docker" / "lock.toml").read_text()
    lines = []
    section = None
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip()
        if section == "[image]" and line.startswith("published_digest"):
            line = f'published_digest = "{digest}"'
        if section == "[image]" and repo and line.startswith("repo"):
            line = f'repo = "{repo}"'
        lines.append(line)
    path = lock_dir / "lock.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_with_no_published_digest_pull_says_so_and_how_to_build(tmp_path, capsys):
    lock_path = copy_lock(tmp_path, digest="")
    code = main(["pull", "--lock", str(lock_path)])
    err = capsys.readouterr().err
    assert code == 3
    lock = load_lock(lock_path)
    assert f"no published image is recorded for lock {lock.hash}" in err
    assert "make image" in err and lock.image_ref in err


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_bundle_pull_end_to_end_from_a_lock_file(tmp_path, registry, base_image, capsys):
    repo = f"{registry}/bundle-test/e2e-{uuid.uuid4().hex[:8]}"
    lock = load_lock(copy_lock(tmp_path, repo=repo))  # the digest is not hashed: the hash is final
    published_repo, digest = publish(registry, base_image, lock.hash)
    lock_path = copy_lock(tmp_path / "final", repo=published_repo, digest=digest)
    final = load_lock(lock_path)
    assert final.hash == lock.hash
    try:
        code = main(["pull", "--lock", str(lock_path)])
        out = capsys.readouterr().out
        assert code == 0, out
        assert final.image_ref in out and docker.image_facts(final.image_ref) is not None
    finally:
        cleanup(final.image_ref, f"{published_repo}@{digest}")
