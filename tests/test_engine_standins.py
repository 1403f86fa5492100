"""The CPU engine rehearsal's project-owned stand-ins hold against the pinned SGLang and nixl: the NIXL
memory-type patch applies exactly (no fuzz, no offset) to the SGLang the lock pins, the progress-thread
patch to the nixl it pins, and the stand-in
`sgl_kernel` defines every name SGLang imports from sgl_kernel. The host venv carries SGLang's Python
files (installed --no-deps); nothing is imported from it and no container starts."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
from pathlib import Path

import pytest

from bundle.lock import load_lock
from bundle.images.sgl_kernel_standin import imported_names, missing_names
from bundle.paths import docker_dir
from tests.conftest import missing, require_tool

PATCH = docker_dir() / "engine" / "nixl-dram.patch"
PROGRESS_PATCH = docker_dir() / "engine" / "nixl-progress-wait.patch"


@pytest.fixture(scope="module")
def sglang_dir() -> Path:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        missing("SGLang's Python files are not installed in this venv (make install adds them --no-deps)")
    return Path(next(iter(spec.submodule_search_locations)))


def test_the_patch_was_made_for_the_pinned_sglang(sglang_dir):
    assert importlib.metadata.version("sglang") == load_lock().pins["sglang"], (
        "the venv's SGLang is not the lock's pin: `make install` again, then re-make "
        f"{PATCH.name} against the new pin if the dry run below fails")


def _dry_run(patch: Path, site: Path) -> str:
    """GNU patch's dry run of `patch` on `site` as the rehearsal image applies it; what it printed."""
    result = subprocess.run([require_tool("patch", "docker/host-packages.sh installs GNU patch"), "--dry-run", "-p1",
                             "--fuzz=0", "--forward", "-d", str(site)],
                            stdin=patch.open("rb"), capture_output=True, text=True)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    assert "offset" not in report and "fuzz" not in report, f"applies only approximately:\n{report}"
    return report


def test_the_nixl_patch_applies_exactly_to_the_pinned_sglang(sglang_dir, tmp_path):
    assert _dry_run(PATCH, sglang_dir.parent).count("checking file") == 2


def test_the_progress_thread_patch_applies_exactly_to_the_pinned_nixl(tmp_path):
    spec = importlib.util.find_spec("nixl_cu13")
    if spec is None or not spec.submodule_search_locations:
        missing("nixl-cu13 is not installed in this venv (make install adds it)")
    assert importlib.metadata.version("nixl-cu13") == load_lock().pins["nixl-cu13"], (
        "the venv's nixl-cu13 is not the lock's pin: `make install` again")
    site = Path(next(iter(spec.submodule_search_locations))).parent
    assert _dry_run(PROGRESS_PATCH, site).count("checking file") == 1


def test_the_standin_defines_every_name_sglang_imports_from_sgl_kernel(sglang_dir):
    wanted = imported_names(sglang_dir)
    assert wanted[""], "the scan found no `from sgl_kernel import` at all: it is broken"
    assert missing_names(docker_dir() / "engine", wanted) == []
