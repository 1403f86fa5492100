"""The monitoring profile's Prometheus image: Debian bookworm's `prometheus` package on the project's
Debian root (docker/prometheus.Dockerfile), built once per hash of its inputs like the rehearsal
image, so no registry is needed.

    python -m bundle.images.prometheus image      # build if missing, print the tag
"""

from __future__ import annotations

import hashlib
import sys

from bundle.errors import BundleError
from bundle.images.lock import load_lock
from bundle.images.debian_root import DEBIAN_ROOT, ensure_debian_root
from bundle.paths import docker_dir

IMAGE_REPOSITORY = "sglang-bundle/prometheus"


def _dockerfile():
    return docker_dir() / "prometheus.Dockerfile"


def package_version() -> str:
    return load_lock().table("monitoring")["prometheus_debian_version"]


def image_tag() -> str:
    """sglang-bundle/prometheus:<hash of the Dockerfile, the package version and the base>."""
    digest = hashlib.sha256(_dockerfile().read_bytes())
    digest.update(package_version().encode() + b"\0" + DEBIAN_ROOT.encode())
    return f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:12]}"


def ensure_image() -> str:
    """Build the image unless one with the current inputs' tag exists; return its tag."""
    # Imported here: reading a tag (bundle validate, render) must not load the Docker client.
    from bundle.stack import engine

    tag = image_tag()
    if engine.image_exists(tag):
        return tag
    ensure_debian_root()
    print(f"monitoring: building {tag} (Debian's prometheus {package_version()}) ...", flush=True)
    engine.build_image_engine_buildkit(context=docker_dir(), dockerfile=_dockerfile(), tags=[tag],
                                       build_args={"BASE_IMAGE": DEBIAN_ROOT,
                                                   "PROMETHEUS_VERSION": package_version()},
                                       labels={"io.sglang-bundle.prometheus-inputs": tag.split(":")[1]})
    return tag


def main(argv: list[str]) -> int:
    if argv[:1] == ["image"]:
        print(ensure_image())
        return 0
    if argv[:1] == ["tag"]:
        print(image_tag())
        return 0
    print("usage: python -m bundle.images.prometheus image | tag", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BundleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
