"""A wing comes off whole: in a copy of the tree, delete one target's folder (bundle/targets/<wing>/) and its
lines in the registry (its import and its entry), and the rest of the driver still imports, `bundle render`
offers the other targets and renders them, and the other targets' fast tests pass. Shown for Kubernetes
and for Slurm (tests/test_import_graph.py keeps the wings from importing each other; this proves nothing
else leans on them either)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The other targets' fast tests, run in the copy with the wing gone.
REMAINING_TESTS = {
    "k8s": ["tests/test_slurm_render.py", "tests/test_render.py", "tests/test_import_graph.py"],
    "slurm": ["tests/test_k8s_render.py", "tests/test_render.py", "tests/test_import_graph.py"],
}
OTHER_FOLDER_TARGET = {"k8s": "slurm", "slurm": "k8s"}

IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
import bundle
names = [m.name for m in pkgutil.walk_packages(bundle.__path__, "bundle.") if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
assert not any(n.startswith("bundle.targets.{wing}") for n in sys.modules), "the removed wing came back"
print(len(names), "modules import")
"""


def _copy_without(wing: str, into: Path) -> Path:
    for part in ("bundle", "compose", "docker", "tests"):
        shutil.copytree(ROOT / part, into / part, ignore=shutil.ignore_patterns("__pycache__", ".cache"))
    for part in ("pyproject.toml",):
        shutil.copy2(ROOT / part, into / part)
    shutil.rmtree(into / "bundle" / "targets" / wing)
    registry = into / "bundle" / "targets" / "registry.py"
    lines = registry.read_text().splitlines(keepends=True)
    its_lines = {f"from bundle.targets import {wing}\n", f"    {wing}.TARGET,\n"}
    kept = [line for line in lines if line not in its_lines]
    assert len(kept) == len(lines) - 2, "the wing's registry lines: its import and its entry"
    registry.write_text("".join(kept))
    return into


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd), "HOME": str(cwd), "BUNDLE_HOME": str(cwd),
           "BUNDLE_RUNS_DIR": str(cwd / "runs"), "NO_COLOR": "1"}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # copies the tree and runs pytest in it: about 15 s a wing
@pytest.mark.parametrize("wing", ["k8s", "slurm"])
def test_a_wing_comes_off_whole(wing, tmp_path):
    tree = _copy_without(wing, tmp_path / "tree")
    imported = _run([sys.executable, "-c", IMPORT_EVERY_MODULE.format(wing=wing)], tree)
    assert imported.returncode == 0, imported.stderr[-3000:]

    helped = _run([sys.executable, "-m", "bundle", "render", "--help"], tree)
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert f"--target {{compose,{OTHER_FOLDER_TARGET[wing]}}}" in " ".join(helped.stdout.split())

    other = OTHER_FOLDER_TARGET[wing]
    rendered = _run([sys.executable, "-m", "bundle", "render", "pd", "--target", other, "-o", str(tmp_path / "out")],
                    tree)
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    assert any((tmp_path / "out").iterdir())
    refused = _run([sys.executable, "-m", "bundle", "render", "pd", "--target", wing, "-o", str(tmp_path / "x")], tree)
    assert refused.returncode == 2 and "invalid choice" in refused.stderr

    tested = _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x", "-m",
                   "not docker and not network and not slow and not gpu and not cluster", *REMAINING_TESTS[wing]], tree)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-2000:]
