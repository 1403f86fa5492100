"""The smoke test of a launched topology, as `bundle smoke` and `bundle tune` run it: the front door,
the servers behind the router read from inside their containers, the configured checks; and the
identity its report carries (what ran, so answers can be compared across topologies)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundle.config.model import Deployment
from bundle.durations import parse_duration
from bundle.stack import runstate
from bundle.stack.frontdoor import FrontDoor, front_door
from bundle.stack.workers import ComposeWorkers
from bundle.topology import Topology
from bundle.verify import runstore
from bundle.verify.smoke import SmokeReport, smoke
from bundle.api import StackView


@dataclass(frozen=True)
class Smoked:
    result: SmokeReport
    front: FrontDoor
    identity: dict  # project, rehearsal, model, lock hash, image, max_tokens: what answered

    @property
    def reasons(self) -> str:
        return "; ".join(f"{s.name}: {s.detail}" for s in self.result.failures)

    def write(self, project: str, **extra) -> Path:
        """The report, runs/<project>/<time>-smoke/smoke.json."""
        data = self.result.to_dict() | self.identity | extra
        return runstore.write_json(runstate.new_run_dir(project, "smoke") / "smoke.json", data)


def run_smoke(dep: Deployment, topology: Topology, record: runstate.LaunchRecord, stack: StackView) -> Smoked:
    """Smoke-test the topology `record` launched, running as `stack` (its target's view, from the registry
    the verb asks); raises nothing for a failed step: see result.ok."""
    front = front_door(dep, topology)
    workers = None
    if topology.has_router:  # the servers behind the router, read from inside their containers
        names = {role.name: role.name for role in dep.roles(topology)}
        workers = ComposeWorkers(stack, names, port=dep.network.worker_port)
    result = smoke(front, topology=topology.name, checks=dep.smoke.checks, max_tokens=dep.smoke.max_tokens,
                   request_timeout=parse_duration(dep.smoke.request_timeout, what="smoke.request_timeout"),
                   workers=workers)
    identity = {"project": record.project, "rehearsal": record.rehearsal, "model": front.model,
                "lock_hash": record.env.get("BUNDLE_LOCK_HASH"), "image": record.env.get("BUNDLE_IMAGE"),
                "max_tokens": dep.smoke.max_tokens}
    return Smoked(result, front, identity)
