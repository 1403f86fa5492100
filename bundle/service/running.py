"""The launched project a running verb acts on (status, logs, top, down), as one typed value: the command
line's service finds it (bundle/service/finding.py: the launch records, the target registry, asking only when
that is ambiguous) and hands it to the verb's service, which never sees the command line."""

from __future__ import annotations

from dataclasses import dataclass

from bundle.api import StackView
from bundle.config.model import Deployment
from bundle.stack.runstate import LaunchRecord
from bundle.topology import Topology


@dataclass(frozen=True)
class Launched:
    project: str
    topology: Topology
    record: LaunchRecord | None  # its launch (for one that is up, rendered again where none was kept)
    containers: tuple[str, ...] = ()  # its containers now, running or stopped
    stack: StackView | None = None  # its target's view of what runs; None when nothing of it is up
    dep: Deployment | None = None  # the config it runs with; None when nothing of it is up

    @property
    def up(self) -> bool:
        return bool(self.containers)
