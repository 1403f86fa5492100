"""The rehearsal image: the real topologies run with worker simulators, the real router, in real containers.

The rehearsal image (docker/rehearsal.Dockerfile): the worker simulator, the real router and SGLang's
bench_serving on a local Debian root, tagged by a hash of everything it is built from, so
`ensure_image()` builds only when an input changed. What a rehearsal adds to the rendered env
(simulated model, short health intervals, knobs) is bundle.render.rehearsal's.

    python -m bundle.images.rehearsal image      # build if missing, print the tag (make rehearsal-image)
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from bundle.stack import docker
from bundle.errors import EXIT_ENVIRONMENT, BundleError
from bundle.paths import docker_dir, project_root

IMAGE_REPOSITORY = "sglang-bundle/rehearsal"
DEBOOTSTRAP_BASE = "sglang-bundle/debian-root:bookworm"
# Where a registry is reachable, any Debian-like image with python3 (venv), curl and CA roots
# serves as the base and is pulled; without one, the Debian root is made here with debootstrap.
BASE_IMAGE = os.environ.get("BUNDLE_REHEARSAL_BASE") or DEBOOTSTRAP_BASE
def dockerfile() -> Path:
    return docker_dir() / "rehearsal.Dockerfile"


def image_inputs() -> list[Path]:
    """Every file the image is built from (the Dockerfile's COPY sources and the Dockerfile)."""
    root = project_root()
    files = [dockerfile(), docker_dir() / "rehearsal.Dockerfile.dockerignore", docker_dir() / "entrypoint.sh",
             docker_dir() / "lock.toml", root / "bundle" / "__init__.py"]
    files += sorted((root / "requirements").glob("rehearsal*.txt"))
    files += sorted(p for p in (root / "bundle" / "simulator").rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts)
    return files


def image_tag() -> str:
    """sglang-bundle/rehearsal:<hash of the inputs>: a changed input gives a new tag."""
    root = project_root()
    digest = hashlib.sha256()
    for path in image_inputs():
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(BASE_IMAGE.encode())
    return f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:12]}"


def ensure_image(*, rebuild: bool = False) -> str:
    """Build the rehearsal image unless one with the current inputs' tag exists; return its tag."""
    tag = image_tag()
    if not rebuild and docker.image_exists(tag):
        return tag
    if not docker.image_exists(BASE_IMAGE):
        make_base_image()
    args = {"context": project_root(), "dockerfile": dockerfile(), "tags": [tag, f"{IMAGE_REPOSITORY}:latest"],
                "build_args": {"BASE_IMAGE": BASE_IMAGE, "VERSION": tag.split(":")[1]},
                "labels": {"io.sglang-bundle.rehearsal-inputs": tag.split(":")[1]}}
    # The Dockerfile uses BuildKit cache mounts: buildx where installed, else the engine's BuildKit.
    if docker.buildx_available():
        docker.build_image(**args, use_buildx=True)
    else:
        docker.build_image_engine_buildkit(**args)
    return tag


def make_base_image() -> None:
    """Pull the base from a registry (BUNDLE_REHEARSAL_BASE), or make the Debian root it is built on
    (debootstrap, about a minute): no registry needed."""
    import subprocess

    if BASE_IMAGE != DEBOOTSTRAP_BASE:
        docker.pull_image(BASE_IMAGE)
        return

    script = docker_dir() / "debian-root.sh"
    print(f"rehearsal: making the base image {BASE_IMAGE} with {script.name} (debootstrap) ...", flush=True)
    result = subprocess.run([str(script), BASE_IMAGE], capture_output=True, text=True)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise BundleError(f"the rehearsal's base image {BASE_IMAGE} could not be made: {' / '.join(detail)}",
                          exit_code=EXIT_ENVIRONMENT,
                          hint="`sudo docker/host-packages.sh` installs debootstrap, then run `sudo docker/debian-root.sh` "
                               "once; or set BUNDLE_REHEARSAL_BASE to an image with python3, venv and curl "
                               "where a registry is reachable")


def main(argv: list[str]) -> int:
    if argv[:1] == ["image"]:
        print(ensure_image(rebuild="--rebuild" in argv))
        return 0
    if argv[:1] == ["tag"]:
        print(image_tag())
        return 0
    print("usage: python -m bundle.images.rehearsal image [--rebuild] | tag", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BundleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
