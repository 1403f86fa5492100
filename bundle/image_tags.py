"""The names of the images the project derives locally (the no-GPU modes' image, a target wing's node image,
the monitoring profile's Prometheus, the Debian root they stand on): each tag a hash of every file the
image is built from plus its parent, so a build happens only when an input changed.

Pure (files and the lock, no Docker): render names the Prometheus image the monitoring profile runs,
and images/ builds it under the same name, both from here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from bundle.lock import load_lock
from bundle.paths import docker_dir, project_root

DEBIAN_ROOT = "sglang-bundle/debian-root:bookworm"
PROMETHEUS_REPOSITORY = "sglang-bundle/prometheus"


def inputs_tag(repository: str, files: Iterable[Path], *parents: str) -> str:
    """`repository:<12 hex>`: the hash of each file's path (from the project root) and bytes, then of
    `parents` (a parent image's tag, a package version): any change gives a new tag."""
    root = project_root()
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(b"\0".join(parent.encode() for parent in parents))
    return f"{repository}:{digest.hexdigest()[:12]}"


def prometheus_dockerfile() -> Path:
    return docker_dir() / "prometheus.Dockerfile"


def prometheus_version() -> str:
    """Debian's prometheus package version the image installs (lock.toml's [monitoring])."""
    return load_lock().table("monitoring")["prometheus_debian_version"]


def prometheus_tag() -> str:
    """sglang-bundle/prometheus:<hash of the Dockerfile, the package version and the base>."""
    return inputs_tag(PROMETHEUS_REPOSITORY, [prometheus_dockerfile()], prometheus_version(), DEBIAN_ROOT)
