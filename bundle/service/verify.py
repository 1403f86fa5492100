"""`bundle verify` as a service: the containers of a running project held to the lock (the image's lock
hash, the installed set read from inside each), one report per container. The verb finds the project,
prints the table or the JSON and exits 1 when Verified.failed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bundle import paths
from bundle.findings import Level
from bundle.images.verify import ContainerReport, verify_container
from bundle.lock import load_lock


@dataclass(frozen=True)
class VerifyRequest:
    project: str
    containers: Sequence[str]  # its containers now (bundle/service/finding.py found them)


@dataclass(frozen=True)
class Verified:
    project: str
    lock_hash: str
    reports: list[ContainerReport]  # in the order the containers were given

    @property
    def failed(self) -> bool:
        return any(v.level is Level.FAIL for v in self.reports)

    def as_dict(self) -> dict:
        return {"project": self.project, "lock_hash": self.lock_hash, "status": "FAIL" if self.failed else "OK",
                "containers": [v.as_dict() for v in self.reports]}


def verify(request: VerifyRequest) -> Verified:
    """Each container of the project against this checkout's lock."""
    lock = load_lock()
    return Verified(request.project, lock.hash,
                    [verify_container(name, lock, paths.project_root()) for name in request.containers])


def notable(report: ContainerReport) -> list:
    """A container's findings worth showing: those that are not OK."""
    return [f for f in report.findings if f.level is not Level.OK]
