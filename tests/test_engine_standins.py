"""The CPU engine rehearsal's project-owned stand-ins hold against the pinned SGLang and nixl: the NIXL
memory-type patch applies exactly (no fuzz, no offset) to the SGLang the lock pins, the progress-thread
patch to the nixl it pins, the top-level declarer writes what Python infers, and the stand-in
`sgl_kernel` defines every name SGLang imports from sgl_kernel. The host venv carries SGLang's Python
files (installed --no-deps); nothing is imported from it and no container starts."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from bundle.lock import load_lock
from bundle.rehearsal.engine.sgl_kernel_standin import imported_names, missing_names
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


# Slow tier: scans the pinned SGLang's whole source for `from sgl_kernel import` (10-40 s).
@pytest.mark.slow
def test_the_standin_defines_every_name_sglang_imports_from_sgl_kernel(sglang_dir):
    wanted = imported_names(sglang_dir)
    assert wanted[""], "the scan found no `from sgl_kernel import` at all: it is broken"
    assert missing_names(docker_dir() / "engine", wanted) == []


def _dist(site: Path, name: str, files: list[str], top_level: str | None = None) -> Path:
    """A distribution installed into `site` as uv installs a wheel: METADATA, RECORD, and its files."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    for rel in files:
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text("")
    (info / "RECORD").write_text("".join(f"{rel},,\n" for rel in [*files, f"{info.name}/METADATA"]))
    if top_level is not None:
        (info / "top_level.txt").write_text(top_level)
    return info


def test_top_level_is_declared_as_python_infers_it_and_a_declared_one_is_left_alone(tmp_path):
    """docker/engine/declare_top_level.py, run as the rehearsal image runs it, on a site folder of its
    own (`-S`: no other site-packages in view): a wheel without top_level.txt gets the names Python
    infers from its RECORD (packages and modules, not dist-info or data folders); one that declares its
    own keeps it, even when it differs from what its files suggest."""
    site = tmp_path / "site"
    inferred = _dist(site, "twopkgs", ["alpha/__init__.py", "alpha/core.py", "beta.py", "twopkgs.data/x.txt"])
    declared = _dist(site, "declared", ["gamma/__init__.py"], top_level="gamma_public\n")
    script = docker_dir() / "engine" / "declare_top_level.py"
    result = subprocess.run([sys.executable, "-S", "-c", f"import sys, runpy; sys.path.insert(0, {str(site)!r}); "
                             f"runpy.run_path({str(script)!r}, run_name='__main__')"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "declared for 1 distributions; packages_distributions() unchanged" in result.stdout
    assert (inferred / "top_level.txt").read_text().split() == ["alpha", "beta"]
    assert (declared / "top_level.txt").read_text() == "gamma_public\n"
