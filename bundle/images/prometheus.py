"""The monitoring profile's Prometheus image: Debian bookworm's `prometheus` package on the project's
Debian root (docker/prometheus.Dockerfile), built once per hash of its inputs like the no-GPU
modes' image, so no registry is needed.

    python -m bundle.images.prometheus image      # build if missing, print the tag
"""

from __future__ import annotations

import sys

from bundle.image_tags import DEBIAN_ROOT, prometheus_dockerfile, prometheus_tag, prometheus_version
from bundle.images import derived
from bundle.images.debian_root import ensure_debian_root
from bundle.paths import docker_dir


def ensure_image(*, report=print) -> str:
    """Build the image unless one with the current inputs' tag exists; return its tag."""
    from bundle.stack import engine

    tag = prometheus_tag()
    if engine.image_exists(tag):
        return tag
    ensure_debian_root(report=report)
    derived.build_unless_present(derived.Build(
        tag=tag, what="monitoring", dockerfile=prometheus_dockerfile(), context=docker_dir(),
        build_args={"BASE_IMAGE": DEBIAN_ROOT, "PROMETHEUS_VERSION": prometheus_version()}, label="prometheus"),
        rebuild=True, report=report,  # presence was checked above, before the Debian root
        detail=f" (Debian's prometheus {prometheus_version()})")
    return tag


def main(argv: list[str]) -> int:
    return derived.command_line("bundle.images.prometheus", argv, ensure=ensure_image, tag=prometheus_tag)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
