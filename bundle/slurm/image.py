"""The rehearsal cluster's node image: the rehearsal image plus Debian bookworm's Slurm 22.05 and
MUNGE (docker/slurm-node.Dockerfile), built once per hash of its inputs (its parent's tag included),
as bundle/images/rehearsal.py builds its own.

    python -m bundle.slurm.image image      # build if missing (and the rehearsal image), print the tag
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

from bundle.errors import BundleError
from bundle.paths import docker_dir, project_root
from bundle.stack import engine

IMAGE_REPOSITORY = "sglang-bundle/slurm-node"


def inputs() -> list[Path]:
    d = docker_dir()
    return [d / "slurm-node.Dockerfile", d / "slurm-node.Dockerfile.dockerignore", d / "slurm" / "node-entrypoint.sh"]


def image_tag(parent: str | None = None) -> str:
    from bundle.images import rehearsal

    root = project_root()
    digest = hashlib.sha256()
    for path in inputs():
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update((parent or rehearsal.image_tag()).encode())
    return f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:12]}"


def ensure_image(*, report=print) -> str:
    """The node image of the current inputs, built (with the rehearsal image under it) if missing."""
    from bundle.images import rehearsal

    parent = rehearsal.ensure_image(report=report)
    tag = image_tag(parent)
    if engine.image_exists(tag):
        return tag
    report(f"slurm: building the node image {tag} on {parent} (Debian's slurm-wlm and munge) ...")
    start = time.monotonic()
    args = {"context": project_root(), "dockerfile": docker_dir() / "slurm-node.Dockerfile", "tags": [tag],
            "build_args": {"PARENT_IMAGE": parent}, "labels": {"io.sglang-bundle.slurm-node-inputs": tag.split(":")[1]}}
    if engine.buildx_available():
        engine.build_image(**args, use_buildx=True)
    else:
        engine.build_image_engine_buildkit(**args)
    report(f"slurm: built {tag} in {time.monotonic() - start:.0f} s")
    return tag


def main(argv: list[str]) -> int:
    if argv[:1] == ["image"]:
        print(ensure_image(report=lambda s: print(s, file=sys.stderr)))
        return 0
    if argv[:1] == ["tag"]:
        print(image_tag())
        return 0
    print("usage: python -m bundle.slurm.image image | tag", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BundleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
