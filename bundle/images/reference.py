"""Image references as Docker reads them: which part of `[image] repo` is the registry.

Docker's rule (distribution/reference): the first path component is a registry host when it has a
`.` or a `:` or is `localhost`; otherwise the name is on Docker Hub (`docker.io`).
"""

from __future__ import annotations

import re

DOCKER_HUB = "docker.io"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def split_registry(repo: str) -> tuple[str | None, str]:
    """(registry host or None for Docker Hub's implicit one, the path under it)."""
    first, sep, rest = repo.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return None, repo


def registry_of(repo: str) -> str:
    """The registry a push or pull of `repo` talks to (what `docker login` needs)."""
    return split_registry(repo)[0] or DOCKER_HUB


def local_name(repo: str) -> str:
    """`repo` without its registry host: the name of images that are never pushed (the stand-in)."""
    return split_registry(repo)[1]
