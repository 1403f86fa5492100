"""Where the bundle finds its own files (compose/, docker/) and where it writes runs."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def _is_project(folder: Path) -> bool:
    return (folder / "compose").is_dir() and (folder / "docker" / "lock.toml").is_file()


def project_root() -> Path:
    """The folder that holds compose/ and docker/: BUNDLE_HOME, else the checkout this package is in
    (an editable install), else the current folder or one above it, as `docker compose` finds its
    file (a driver installed on its own, `pipx install .` / `uv tool install .`, run in the checkout)."""
    env = os.environ.get("BUNDLE_HOME")
    if env:
        return Path(env).resolve()
    if _is_project(PACKAGE_DIR.parent):
        return PACKAGE_DIR.parent
    cwd = Path.cwd()
    for folder in (cwd, *cwd.parents):
        if _is_project(folder):
            return folder
    from bundle.errors import NotFound

    raise NotFound(f"no project folder (compose/ and docker/lock.toml) in {cwd} or above it, "
                   f"nor next to the installed driver ({PACKAGE_DIR})",
                   hint="run `bundle` inside the project's checkout, or set BUNDLE_HOME to it")


def compose_dir() -> Path:
    return project_root() / "compose"


def docker_dir() -> Path:
    return project_root() / "docker"


def runs_dir() -> Path:
    """Reports, rendered env files and saved logs: BUNDLE_RUNS_DIR, else ./runs under the project."""
    env = os.environ.get("BUNDLE_RUNS_DIR")
    return Path(env).resolve() if env else project_root() / "runs"
