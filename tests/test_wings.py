"""A wing comes off whole: in a copy of the tree (its tracked files, as they are in the working tree), delete
one target's folder (bundle/targets/<wing>/) and its registry lines (its import and entry in
bundle/targets/registry.py, its import and entry in bundle/targets/sections.py), and the rest still holds:
every module imports, `bundle render` offers the other targets and renders them, the schema refuses the
gone wing's section naming the file, the key and the fix, the fast tier passes (less the gone wing's own
test files: those that import it) and the documentation site builds with --strict. Shown for Kubernetes and
for Slurm (tests/test_import_graph.py keeps the wings from importing each other; this proves nothing else
leans on them either)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.docs_site_build import build_site

ROOT = Path(__file__).resolve().parents[1]
SECTION = {"k8s": "kubernetes", "slurm": "slurm"}
FAST_TIER = "not docker and not network and not slow and not gpu and not cluster"

IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
import bundle
names = [m.name for m in pkgutil.walk_packages(bundle.__path__, "bundle.") if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
assert not any(n.startswith("bundle.targets.{wing}") for n in sys.modules), "the removed wing came back"
print(len(names), "modules import")
"""


def _tracked_copy(into: Path) -> Path:
    """The checkout's tracked files as they are now (committed or not), without anything git ignores."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree stays deleted
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    for installed in (".venv", ".venv-inference-perf"):  # the dev install (git-ignored): its tools, as here
        if (ROOT / installed).exists():
            (into / installed).symlink_to((ROOT / installed).resolve())
    return into


def _remove_lines(path: Path, lines: set[str]) -> None:
    text = path.read_text().splitlines(keepends=True)
    kept = [line for line in text if line not in lines]
    assert len(kept) == len(text) - len(lines), f"{path.name}: the wing's lines {sorted(lines)}"
    path.write_text("".join(kept))


def _copy_without(wing: str, into: Path) -> Path:
    tree = _tracked_copy(into)
    shutil.rmtree(tree / "bundle" / "targets" / wing)
    targets = tree / "bundle" / "targets"
    _remove_lines(targets / "registry.py", {f"from bundle.targets.{wing} import target as {wing}\n",
                                            f"    {wing}.TARGET,\n"})
    _remove_lines(targets / "sections.py", {f"from bundle.targets import {wing}\n", f"    {wing},\n"})
    return tree


def _own_tests(tree: Path, wing: str) -> list[Path]:
    """The gone wing's own test files: those that import it at the top."""
    its = re.compile(rf"^(from|import) bundle\.targets\.{wing}\b", re.M)
    return [p for p in sorted((tree / "tests").rglob("test_*.py")) if its.search(p.read_text())]


def _run(cmd: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    # This environment (the tools, Docker's client plugins under HOME), the copy's code and its own runs/.
    env = {**os.environ, "PYTHONPATH": str(cwd), "BUNDLE_RUNS_DIR": str(cwd / "runs"), "NO_COLOR": "1"}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # copies the tree, runs the fast tier and builds the site in it: about 6 minutes a wing
@pytest.mark.timeout(1800)  # past the suite's 300 s bound: the fast tier runs whole inside it
@pytest.mark.parametrize("wing", ["k8s", "slurm"])
def test_a_wing_comes_off_whole(wing, tmp_path):
    tree = _copy_without(wing, tmp_path / "tree")
    imported = _run([sys.executable, "-c", IMPORT_EVERY_MODULE.format(wing=wing)], tree)
    assert imported.returncode == 0, imported.stderr[-3000:]

    other = next(w for w in SECTION if w != wing)
    helped = _run([sys.executable, "-m", "bundle", "render", "--help"], tree)
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert f"--target {{compose,{other}}}" in " ".join(helped.stdout.split())
    rendered = _run([sys.executable, "-m", "bundle", "render", "pd", "--target", other, "-o", str(tmp_path / "out")],
                    tree)
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    assert any((tmp_path / "out").iterdir())
    refused = _run([sys.executable, "-m", "bundle", "render", "pd", "--target", wing, "-o", str(tmp_path / "x")], tree)
    assert refused.returncode == 2 and "invalid choice" in refused.stderr

    # A bundle.yaml written for the wing: refused before anything runs, naming the file, line, key and fix.
    config = tmp_path / "bundle.yaml"
    config.write_text(f"project: mine\n{SECTION[wing]}:\n  log_dir: x\n")
    validated = _run([sys.executable, "-m", "bundle", "validate", "pd", "-c", str(config)], tree)
    assert validated.returncode == 3, validated.stderr[-2000:]
    assert f"{config}:2: {SECTION[wing]}: not a section of bundle.yaml" in validated.stderr
    assert "delete it or fix its name" in validated.stderr and "Traceback" not in validated.stderr

    own = _own_tests(tree, wing)
    assert own, "the wing's own tests: none found, so none were left out"
    for path in own:
        path.unlink()
    started = time.monotonic()
    # The guides' citations of the deleted package (configuration.md names bundle/targets/<wing>/) dangle by
    # design once it is gone: tests/test_docs_cited_paths.py is left out here; the site still builds below.
    tested = _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "-q", "-x",
                   "--dist", "loadfile", "-m", FAST_TIER, "--ignore", "tests/test_docs_cited_paths.py"],
                  tree, timeout=1800)
    print(f"fast tier without {wing}: {time.monotonic() - started:.0f} s, {len(own)} of its own files left out")
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]

    print(f"docs without {wing}: {build_site(tree, tmp_path / 'site'):.0f} s")
