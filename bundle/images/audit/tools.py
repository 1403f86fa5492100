"""The audit's own tools (cuobjdump from nvidia-cuda-cuobjdump, cyclonedx-bom), installed once from
requirements/audit-tools.txt (hashes required) into .cache/audit-tools/py for CPython 3.12 on
manylinux x86_64, and mounted read-only into the audited container: never part of the image."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from bundle import paths
from bundle.errors import EnvironmentProblem, NotFound
from bundle.run import run

CUOBJDUMP = "py/nvidia/cu13/bin/cuobjdump"
PYTHON = "3.12"  # the image's Python: the tools' compiled wheels (lxml, rpds-py) must match it
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(17, 29)] + ["manylinux2014_x86_64"]


def _driver_root() -> Path:
    """The checkout the driver runs from: the tools belong to the driver, not to the project being
    built (BUNDLE_HOME may point at a copy holding only docker/ and kernels/)."""
    return paths.PACKAGE_DIR.parent


def requirements_file() -> Path:
    return _driver_root() / "requirements" / "audit-tools.txt"


def ensure(report=None) -> Path:
    """The tools folder, installed (again) when requirements/audit-tools.txt changed."""
    req = requirements_file()
    if not req.is_file():
        raise NotFound(f"{req}: missing", hint="restore it from git")
    folder = _driver_root() / ".cache" / "audit-tools"
    stamp = folder / "installed-from.sha256"
    digest = hashlib.sha256(req.read_bytes()).hexdigest()
    if stamp.is_file() and stamp.read_text().strip() == digest and (folder / CUOBJDUMP).is_file():
        return folder
    if report:
        report(f"installing the audit tools from {req.name} into {folder} ...")
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--upgrade",
           "--target", str(folder / "py"), "--require-hashes", "--no-deps", "--only-binary=:all:",
           "--python-version", PYTHON, "--implementation", "cp", "--abi", "cp312", "--abi", "abi3",
           "--abi", "none", *platforms, "-r", str(req)]
    proc = run(cmd, timeout=3600, check=False)  # a few hundred MB of wheels; an hour means a hung index
    if proc.returncode != 0 or not (folder / CUOBJDUMP).is_file():
        tail = " / ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise EnvironmentProblem(f"installing the audit tools from {req} failed: {tail}",
                                 hint="check that PyPI is reachable (pip's index settings apply)")
    stamp.write_text(digest + "\n")
    return folder
