"""Where the bundle finds its own files (compose/, docker/) and where it writes runs."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def project_root() -> Path:
    """The folder that holds compose/ and docker/: BUNDLE_HOME, else the checkout this package is in."""
    env = os.environ.get("BUNDLE_HOME")
    if env:
        return Path(env).resolve()
    return PACKAGE_DIR.parent


def compose_dir() -> Path:
    return project_root() / "compose"


def docker_dir() -> Path:
    return project_root() / "docker"


def runs_dir() -> Path:
    """Reports, rendered env files and saved logs: BUNDLE_RUNS_DIR, else ./runs under the project."""
    env = os.environ.get("BUNDLE_RUNS_DIR")
    return Path(env).resolve() if env else project_root() / "runs"
