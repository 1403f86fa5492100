"""The project's plain Debian root (docker/debian-root.sh: bookworm made with debootstrap and imported
as a local image), for images that need no CPython 3.12 and no registry: the monitoring profile's
Prometheus (Debian's own package) is built on it."""

from __future__ import annotations

from collections.abc import Callable

from bundle.errors import EnvironmentProblem
from bundle.image_tags import DEBIAN_ROOT
from bundle.images.root_script import run_root_script
from bundle.paths import docker_dir


def ensure_debian_root(*, report: Callable[[str], None]) -> str:
    """The Debian root's tag, made first (debootstrap, minutes on a fresh host) when this engine lacks
    it; `report` takes the line that says so and the script's progress lines."""
    # Imported here: reading a tag (bundle validate, render) must not load the Docker client.
    from bundle.stack import engine

    if engine.image_exists(DEBIAN_ROOT):
        return DEBIAN_ROOT
    script = docker_dir() / "debian-root.sh"
    report(f"making the base image {DEBIAN_ROOT} with {script.name} (debootstrap, minutes on a fresh host) ...")
    returncode, detail = run_root_script(script, DEBIAN_ROOT, label="base image", report=report)
    if returncode != 0:
        raise EnvironmentProblem(f"the base image {DEBIAN_ROOT} could not be made: {' / '.join(detail)}",
                                 hint="`sudo docker/host-packages.sh` installs debootstrap, then run "
                                      "`sudo docker/debian-root.sh` once")
    return DEBIAN_ROOT
