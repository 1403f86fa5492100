"""DownRequest -> the launched project's containers and network removed (its JIT cache volume too when
asked), and what down answers for: only the volumes its own launch recorded as made. Compose keeps the
cache and data volumes by design, and another target's launch under the same project name made others:
those are named as left alone, never a failure."""

from __future__ import annotations

from dataclasses import dataclass

from bundle.service.running import Launched
from bundle.stack import docker


@dataclass(frozen=True)
class DownRequest:
    target: Launched | None  # the one launched project with containers; None: no launched one has any
    volumes: bool = False  # also the volumes its launch made (the JIT cache: the next start recompiles)
    timeout: int | None = None  # the stop grace period, seconds (None: compose's)


@dataclass(frozen=True)
class Downed:
    project: str | None  # None: nothing was up, nothing was taken down
    removed: int = 0  # containers removed
    volumes_removed: bool = False
    left: tuple[str, ...] = ()  # what is still present that down answers for
    alone: tuple[str, ...] = ()  # volumes present that its launch did not make

    @property
    def ok(self) -> bool:
        return not self.left


NOTHING_UP = Downed(None)


def down(request: DownRequest) -> Downed:
    target = request.target
    if target is None:
        return NOTHING_UP
    volumes_removed = target.stack.down(volumes=request.volumes, timeout=request.timeout)
    left = docker.project_containers(target.project) + docker.project_networks(target.project)
    own = set(target.record.created_volumes) if target.record else set()
    volumes = docker.project_volumes(target.project)
    if volumes_removed:
        left += sorted(own & set(volumes))
    alone = sorted(set(volumes) - own) if volumes_removed else []
    return Downed(target.project, len(target.containers), volumes_removed, tuple(left), tuple(alone))


def require_docker() -> None:
    """The engine and compose answer (down looks the launched projects up through them): a clear error otherwise."""
    from bundle.stack import engine

    engine.require_engine()
    engine.require_compose()
