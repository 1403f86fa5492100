"""The release path end to end on a tiny image chain, with the same verbs the release workflow runs:
an image with a venv holding exactly the tiny lock's one distribution (a real wheel, hash-pinned),
its CycloneDX SBOM at /opt/bundle/sbom.cdx.json and the SBOM/lock-hash labels, as `bundle build`
makes them; `bundle push` to a real registry on 127.0.0.1; `bundle lock set-digest`; the local
image removed; `bundle pull` by digest verifies it. Then an image with a package planted after the
SBOM was written, pushed and recorded as the digest the same way, is refused naming the package.
(The 11 GB stand-in runtime image went through the same commands once: docs/release.md.)"""

from __future__ import annotations

import hashlib
import subprocess
import uuid

import pytest

from bundle.cli import main
from bundle.lock import LOCK_HASH_LABEL, load_lock
from bundle.images.sbom import SBOM_LABEL, SBOM_PATH
from bundle.stack import engine
from tests.release_fixtures import copy_lock, cyclonedx, ensure_base_image, make_wheel, pinned, serve_registry, sh

LOCKED = ("bundle-release-fixture", "1.0")
PLANTED = ("bundle-planted-extra", "6.6.6")
SITE = "/opt/venv/lib/python3.11/site-packages"


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    yield from serve_registry(tmp_path_factory.mktemp("registry"))


def outputs(path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def build(context, tag: str, dockerfile: str) -> None:
    (context / "Dockerfile").write_text(dockerfile)
    sh("docker", "build", "-q", "-t", tag, str(context))


def install_wheel(wheel_name: str) -> str:
    """A RUN step installing a wheel into /opt/venv with pip from a throw-away venv (the image's own
    venv holds no pip: only what the lock pins)."""
    return (f"RUN python3 -m venv /tmp/tools && /tmp/tools/bin/pip install -q --no-index --no-deps "
            f"--target {SITE} /tmp/{wheel_name} && rm -rf /tmp/tools /tmp/{wheel_name}\n")


def forget(*refs: str) -> None:
    for ref in refs:
        subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True, check=False)


@pytest.mark.docker
@pytest.mark.timeout(600)
def test_push_then_pull_by_digest_verifies_and_a_planted_package_is_refused(tmp_path, registry, capsys):
    base = ensure_base_image()
    wheel = make_wheel(tmp_path, *LOCKED)
    planted = make_wheel(tmp_path, *PLANTED)
    repo = f"{registry}/bundle-test/release-{uuid.uuid4().hex[:8]}"
    lock_path = copy_lock(tmp_path / "lock", repo=repo,
                          requirements={"base": pinned(*LOCKED, wheel), "framework": "", "pd": ""})
    lock = load_lock(lock_path)
    sbom = cyclonedx([LOCKED])
    (tmp_path / "sbom.cdx.json").write_bytes(sbom)
    good = f"bundle-test/release-good-{uuid.uuid4().hex[:8]}:t"
    refs = [good, lock.image_ref]
    try:
        build(tmp_path, good,
              f"FROM {base}\nRUN python3 -m venv --without-pip /opt/venv\nENV PATH=/opt/venv/bin:$PATH\n"
              f"COPY {wheel.name} /tmp/\n" + install_wheel(wheel.name) +
              f"COPY sbom.cdx.json {SBOM_PATH}\n"
              f"LABEL {LOCK_HASH_LABEL}={lock.hash} {SBOM_LABEL}={hashlib.sha256(sbom).hexdigest()}\n")

        # The workflow's steps: where it goes, push by digest (the SBOM comes out for attestation), record.
        out = tmp_path / "github-output"
        assert main(["push", "--lock", str(lock_path), "--dry-run", "--output", str(out)]) == 0
        assert outputs(out)["registry"] == registry and outputs(out)["tag"] == lock.image_ref
        out.unlink()
        assert main(["push", "--lock", str(lock_path), "--image", good, "--output", str(out),
                     "--sbom-out", str(tmp_path / "attest" / "sbom.json")]) == 0
        pushed = outputs(out)
        digest = pushed["digest"]
        assert pushed["ref"] == f"{repo}@{digest}" and (tmp_path / "attest" / "sbom.json").read_bytes() == sbom
        assert main(["lock", "set-digest", digest, "--lock", str(lock_path)]) == 0
        assert load_lock(lock_path).published_digest == digest
        refs.append(f"{repo}@{digest}")

        # A clean engine for this image: nothing local names it any more.
        forget(good, lock.image_ref)
        assert engine.image_facts(f"{repo}@{digest}") is None
        capsys.readouterr()
        assert main(["pull", "--lock", str(lock_path)]) == 0
        captured = capsys.readouterr()
        for check in ("digest", "label", "sbom", "contents"):
            assert any(line.startswith("ok") and f" {check} " in line for line in captured.out.splitlines()), \
                (check, captured.out)
        assert "1 distributions in /opt/venv equal the lock" in captured.out
        # cosign is not installed here: said, with the command that would check it; not a silent pass.
        assert "signature NOT CHECKED: cosign is not installed" in captured.err
        assert "cosign verify --certificate-identity-regexp" in captured.err and f"{repo}@{digest}" in captured.err
        assert engine.image_facts(lock.image_ref).id == engine.image_facts(f"{repo}@{digest}").id

        # Someone installs a package after the SBOM was written and publishes that image instead.
        bad = f"bundle-test/release-bad-{uuid.uuid4().hex[:8]}:t"
        refs.append(bad)
        build(tmp_path, bad, f"FROM {lock.image_ref}\nCOPY {planted.name} /tmp/\n" + install_wheel(planted.name))
        out.unlink()
        assert main(["push", "--lock", str(lock_path), "--image", bad, "--output", str(out)]) == 0
        bad_digest = outputs(out)["digest"]
        assert bad_digest != digest
        assert main(["lock", "set-digest", bad_digest, "--lock", str(lock_path)]) == 0
        refs.append(f"{repo}@{bad_digest}")
        forget(bad, lock.image_ref, f"{repo}@{digest}")
        capsys.readouterr()
        assert main(["pull", "--lock", str(lock_path)]) == 1
        err = capsys.readouterr().err
        assert f"refused {repo}@{bad_digest}" in err
        assert f"contents: {PLANTED[0]} {PLANTED[1]} is installed but unknown to the lock" in err
        assert engine.image_facts(f"{repo}@{bad_digest}") is None and engine.image_facts(lock.image_ref) is None
    finally:
        forget(*refs)
