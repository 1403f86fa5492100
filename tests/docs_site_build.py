"""The documentation site built for a test: mkdocs build --strict (the gen-files script writes the
reference pages from the code) of this checkout, or of a copy of it that a test plants something in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the build reads: the site's sources and the code its reference pages are generated from.
SITE_SOURCES = ("mkdocs.yml", "docs", "docsgen", "bundle", "docker", "compose")


def copy_checkout(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for part in SITE_SOURCES:
        source = ROOT / part
        (shutil.copytree(source, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
         if source.is_dir() else shutil.copy2(source, dest / part))
    return dest


def build_site(root: Path, out: Path) -> float:
    """Build `root`'s site into `out`; the seconds it took. mkdocs comes from the dev install
    (requirements/dev.txt): without it the build fails here, it is never skipped."""
    # Never --quiet: mkdocs 1.6 then drops the warnings before --strict counts them.
    # The copy first on the path: its bundle/ and docsgen/ are the ones planted in.
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, "PYTHONPATH": path, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(root / "mkdocs.yml"), "-d", str(out)], env=env, capture_output=True, text=True,
                          cwd=root, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return time.monotonic() - started
