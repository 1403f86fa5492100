"""The compose target: the core's own (render/compose.py renders every topology for compose first, the
other targets start from that render; service/launch.py brings it up; stack/docker.py is its view of the
running project). This is only its entry in the registry."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bundle.api import Target
from bundle.render import compose
from bundle.service import launch
from bundle.stack.runstate import LaunchRecord

if TYPE_CHECKING:
    from bundle.stack import docker


def _stack(record: LaunchRecord) -> docker.Stack:
    # Imported here: the Docker client is half a second of imports that `bundle render`, and every
    # verb that only reads the registry, never need.
    from bundle.stack import docker

    return docker.Stack(record.project, [Path(f) for f in record.compose_files], Path(record.env_file),
                        profiles=list(record.profiles))


TARGET = Target("compose", "the env file, and the configuration exactly as docker compose resolves it",
                renderer=compose, stack=_stack, writes_folder=False, takes_mode=True, launcher=launch,
                launch_help="this host")
