"""The container cluster's node image: its parent (the image the no-GPU modes run in: Mode.image_tag) plus
Debian bookworm's Slurm 22.05 and MUNGE (docker/slurm-node.Dockerfile), built once per hash of its inputs
(its parent's tag included), as the parent is.

    python -m bundle.targets.slurm.image image PARENT   # build on PARENT if missing, print the tag
"""

from __future__ import annotations

import sys
from pathlib import Path

from bundle.image_tags import inputs_tag
from bundle.images import derived
from bundle.paths import docker_dir, project_root

IMAGE_REPOSITORY = "sglang-bundle/slurm-node"


def inputs() -> list[Path]:
    d = docker_dir()
    return [d / "slurm-node.Dockerfile", d / "slurm-node.Dockerfile.dockerignore", d / "slurm" / "node-entrypoint.sh"]


def image_tag(parent: str) -> str:
    return inputs_tag(IMAGE_REPOSITORY, inputs(), parent)


def ensure_image(parent: str, *, report=print) -> str:
    """The node image of the current inputs on `parent` (an image already here), built if missing."""
    tag = image_tag(parent)
    derived.build_unless_present(derived.Build(
        tag=tag, what="slurm", dockerfile=docker_dir() / "slurm-node.Dockerfile", context=project_root(),
        build_args={"PARENT_IMAGE": parent}, label="slurm-node"),
        report=report, detail=f" (the node image) on {parent} (Debian's slurm-wlm and munge)")
    return tag


def main(argv: list[str]) -> int:
    """`image PARENT | tag PARENT`; PARENT is the modes' image (`bundle launch --target slurm` with a mode
    builds both, the parent first)."""
    parent = argv[1] if len(argv) == 2 else ""
    # Without PARENT, no verb: the derived images' command line prints its usage.
    return derived.command_line("bundle.targets.slurm.image", argv[:1] if parent else [],
                                ensure=lambda report: ensure_image(parent, report=report),
                                tag=lambda: image_tag(parent))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
