"""The rehearsal cluster's node image: the rehearsal image plus Debian bookworm's Slurm 22.05 and
MUNGE (docker/slurm-node.Dockerfile), built once per hash of its inputs (its parent's tag included),
as bundle/rehearsal/shared/image.py builds its own.

    python -m bundle.targets.slurm.image image      # build if missing (and the rehearsal image), print the tag
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


def image_tag(parent: str | None = None) -> str:
    from bundle.rehearsal.shared import image as rehearsal

    return inputs_tag(IMAGE_REPOSITORY, inputs(), parent or rehearsal.image_tag())


def ensure_image(*, report=print) -> str:
    """The node image of the current inputs, built (with the rehearsal image under it) if missing."""
    from bundle.rehearsal.shared import image as rehearsal

    parent = rehearsal.ensure_image(report=report)
    tag = image_tag(parent)
    derived.build_unless_present(derived.Build(
        tag=tag, what="slurm", dockerfile=docker_dir() / "slurm-node.Dockerfile", context=project_root(),
        build_args={"PARENT_IMAGE": parent}, label="slurm-node"),
        report=report, detail=f" (the node image) on {parent} (Debian's slurm-wlm and munge)")
    return tag


def main(argv: list[str]) -> int:
    return derived.command_line("bundle.targets.slurm.image", argv, ensure=ensure_image, tag=image_tag)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
