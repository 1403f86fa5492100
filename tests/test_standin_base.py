"""How the stand-in for the CUDA base is had on a machine without a GPU: the lock's pinned
python:3.12-slim-bookworm where a registry gives it, else docker/standin-root.sh with a local CPython
3.12, else one message naming every way out (the stand-in chain itself is built by the Docker tier)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bundle.errors import EXIT_ENVIRONMENT, BundleError, DockerFailed
from bundle.images import build
from bundle.lock import load_lock
from bundle.stack import engine

REPO = Path(__file__).resolve().parents[1]
PINNED = load_lock().table("standin")["python_image"]


def _cpython(prefix: Path) -> Path:
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python3.12").write_text("")
    return prefix


def test_the_lock_pins_the_python_image_by_digest_outside_the_lock_hash():
    assert PINNED.startswith("python:3.12-slim-bookworm@sha256:") and len(PINNED.split("@sha256:")[1]) == 64


def test_a_registry_that_gives_the_pinned_image_wins_over_a_local_cpython(tmp_path):
    assert build.choose_standin_source(PINNED, pulled=lambda: True, local_python=_cpython(tmp_path / "py")) \
        == "python-image"


def test_without_a_registry_the_local_cpython_is_used(tmp_path):
    assert build.choose_standin_source(PINNED, pulled=lambda: False, local_python=_cpython(tmp_path / "py")) \
        == "standin-root"


def test_with_neither_one_error_names_every_fix(tmp_path):
    with pytest.raises(BundleError) as err:
        build.choose_standin_source(PINNED, pulled=lambda: False, local_python=tmp_path / "nowhere")
    text = str(err.value)
    assert err.value.exit_code == EXIT_ENVIRONMENT
    assert PINNED in text and str(tmp_path / "nowhere") in text
    assert f"docker pull {PINNED}" in text and "STANDIN_PYTHON" in text and "BUNDLE_STANDIN_BASE" in text


def test_a_pulled_python_image_becomes_the_standin_base_without_the_script(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(engine, "image_facts", lambda ref: None)
    monkeypatch.setattr(engine, "pull_image", lambda ref: calls.append(("pull", ref)))
    monkeypatch.setattr(engine, "tag_image", lambda src, dst: calls.append(("tag", src, dst)))
    monkeypatch.setattr(build, "run_root_script", lambda *a, **k: pytest.fail("the script must not run"))
    monkeypatch.setenv("STANDIN_PYTHON", str(tmp_path / "nowhere"))
    build.ensure_standin_base("bundle-test/standin:x", load_lock(), report=lambda _m: None)
    assert calls == [("pull", PINNED), ("tag", PINNED, "bundle-test/standin:x")]


def test_no_registry_and_no_cpython_stops_before_the_script(monkeypatch, tmp_path):
    def refused(ref):
        raise DockerFailed(f"docker pull {ref} failed:\nno such host")
    monkeypatch.setattr(engine, "image_facts", lambda ref: None)
    monkeypatch.setattr(engine, "pull_image", refused)
    monkeypatch.setattr(build, "run_root_script", lambda *a, **k: pytest.fail("the script must not run"))
    monkeypatch.setenv("STANDIN_PYTHON", str(tmp_path / "nowhere"))
    with pytest.raises(BundleError, match="cannot make the stand-in base"):
        build.ensure_standin_base("bundle-test/standin:x", load_lock(), report=lambda _m: None)


def test_the_script_without_a_cpython_says_the_ways_out(tmp_path):
    proc = subprocess.run(["bash", str(REPO / "docker" / "standin-root.sh"), "bundle-test/standin-none:never"],
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "STANDIN_PYTHON": str(tmp_path / "nowhere")},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4
    assert f"no CPython 3.12 at {tmp_path / 'nowhere'}" in proc.stderr
    assert "python:3.12-slim-bookworm" in proc.stderr and "STANDIN_PYTHON=" in proc.stderr
    assert "BUNDLE_STANDIN_BASE" in proc.stderr


def test_the_scripts_lines_are_the_progress_and_its_last_lines_the_error(monkeypatch, tmp_path):
    """debootstrap takes minutes on a fresh host: every line it prints is shown as it comes, and a
    failure names the script's last lines."""
    script = tmp_path / build.STANDIN_SCRIPT
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\necho 'I: Retrieving InRelease'\necho 'I: Validating Packages' >&2\n"
                      "echo 'E: no space left' >&2\nexit 3\n")
    script.chmod(0o755)
    monkeypatch.setattr(engine, "image_facts", lambda ref: None)
    monkeypatch.setattr(build, "choose_standin_source", lambda *a, **k: "standin-root")
    lock = load_lock()
    monkeypatch.setattr(build.paths, "project_root", lambda: tmp_path)
    seen = []
    with pytest.raises(BundleError, match="E: no space left") as err:
        build.ensure_standin_base("bundle-test/standin:x", lock, report=seen.append)
    assert "  stand-in base | I: Retrieving InRelease" in seen
    assert "  stand-in base | I: Validating Packages" in seen  # stderr too
    assert "could not be made" in err.value.message
