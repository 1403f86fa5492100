"""The smoke test of a launched topology, as `bundle smoke` and `bundle tune` run it: the front door,
the servers behind the router read from inside their containers, the configured checks; and the
identity its report carries (what ran, so answers can be compared across topologies). `bundle smoke` takes
a SmokeRequest (smoke_launched): the smoke, its greedy answers held against the last comparable report of
another topology, the report written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundle import modes
from bundle import topology as registry
from bundle.config.model import Deployment
from bundle.durations import parse_duration
from bundle.stack import runstate
from bundle.stack.frontdoor import FrontDoor, front_door
from bundle.stack.workers import ComposeWorkers
from bundle.topology import Topology
from bundle.verify import runstore
from bundle.verify.smoke import SmokeReport, compare_answers, last_comparable_report, smoke
from bundle.api import StackView
from bundle.service.running import Launched


@dataclass(frozen=True)
class Smoked:
    result: SmokeReport
    front: FrontDoor
    identity: dict  # project, no-GPU mode, model, lock hash, image, max_tokens: what answered

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
    identity = {"project": record.project, modes.record_key(): record.mode, "model": front.model,
                "lock_hash": record.env.get("BUNDLE_LOCK_HASH"), "image": record.env.get("BUNDLE_IMAGE"),
                "max_tokens": dep.smoke.max_tokens}
    return Smoked(result, front, identity)


@dataclass(frozen=True)
class SmokeRequest:
    target: Launched  # the launched project that is up (bundle/service/finding.py found it)

    @property
    def front(self) -> FrontDoor:
        """Where the smoke knocks (the verb names it while the smoke runs)."""
        return front_door(self.target.dep, self.target.topology)


@dataclass(frozen=True)
class SmokeReported:
    smoked: Smoked
    path: Path  # the report written, runs/<project>/<time>-smoke/smoke.json

    @property
    def data(self) -> dict:
        return self.smoked.result.to_dict() | self.smoked.identity


def smoke_launched(request: SmokeRequest) -> SmokeReported:
    """`bundle smoke`: the smoke of the launched project; greedy answers must not depend on the topology,
    so they are held against the last comparable report of another topology of the same deployment (a
    difference is a failed step); the report written either way."""
    target = request.target
    dep, topology = target.dep, target.topology
    smoked = run_smoke(dep, topology, target.record, target.stack)
    others = [runstate.project_dir(dep.project_name(t.name)) for t in registry.TOPOLOGIES.values() if t != topology]
    earlier, earlier_path = last_comparable_report(others, smoked.identity)
    compare_answers(smoked.result, earlier, where=earlier_path or "")
    return SmokeReported(smoked, smoked.write(target.project))
