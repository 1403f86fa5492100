"""Shared fixtures. Docker tests skip without an engine unless BUNDLE_REQUIRE_DOCKER=1 (CI sets it),
which turns those skips into failures: a CI run that silently skipped the real-engine tests would
prove nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _compose_works() -> bool:
    try:
        return subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


_ENGINE = None


def pytest_collection_modifyitems(config, items):
    global _ENGINE
    needs = [item for item in items if item.get_closest_marker("docker")]
    if not needs:
        return
    if _ENGINE is None:
        _ENGINE = _engine_answers()
    if _ENGINE:
        return
    if os.environ.get("BUNDLE_REQUIRE_DOCKER") == "1":
        raise pytest.UsageError(f"BUNDLE_REQUIRE_DOCKER=1 but no Docker engine answers; "
                                f"{len(needs)} tests need one")
    skip = pytest.mark.skip(reason="no Docker engine (set BUNDLE_REQUIRE_DOCKER=1 to fail instead)")
    for item in needs:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def compose_available() -> bool:
    return _compose_works()


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def runs_dir(tmp_path, monkeypatch) -> Path:
    """Every test writes its rendered env files and reports under its own folder."""
    path = tmp_path / "runs"
    monkeypatch.setenv("BUNDLE_RUNS_DIR", str(path))
    return path


def write_config(tmp_path: Path, text: str, name: str = "bundle.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def render_for(dep, topology: str, **kwargs):
    """The one render a command makes, with the checkout's lock for the image and its hash."""
    from bundle import topology as registry
    from bundle.images.lock import load_lock
    from bundle.render.compose import render

    lock = load_lock()
    return render(dep, registry.get(topology), image=lock.image_ref, lock_hash=lock.hash, **kwargs)


def checked(dep, topology: str, *, require_model: bool = False):
    """The rules' findings for one topology of `dep`, as every command gets them."""
    from bundle.rules.check import check

    return check(dep, render_for(dep, topology), require_model=require_model)


@contextmanager
def compose_project(prefix: str):
    """A unique project name for a test; afterwards every topology of it is taken down with
    `down -v --remove-orphans`, whatever a failed assertion left behind."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    try:
        yield name
    finally:
        for topology in ("tp4", "pd", "dp"):
            subprocess.run(["docker", "compose", "-p", f"{name}-{topology}", "down", "-v", "--remove-orphans",
                            "-t", "2"], capture_output=True)
