"""A submitted job as the verbs after launch see it: its record under runs/<project>/slurm/job.json
(job id, the allocation's nodes, which role runs where, where its logs are), and what Slurm says of it
now (the job's state, its steps, its nodes')."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bundle import modes
from bundle.errors import Failed, TimedOut
from bundle.targets.slurm.client import SlurmClient
from bundle.stack import runstate

RECORD_NAME = "job.json"
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE")


@dataclass
class JobRecord:
    project: str
    job_id: str
    nodes: list[str]  # the allocation, in order: NODES[i] of the script
    placement: dict[str, list[str]]  # role -> its nodes
    log_dir: str  # the job's per-node logs as this host reads them
    # The no-GPU mode the container cluster runs, or None on a real cluster; on disk under modes.record_key().
    mode: str | None
    client_container: str | None = None  # the container cluster's controller container; None on a real cluster
    workdir: str | None = None

    @property
    def client(self) -> SlurmClient:
        return SlurmClient(self.client_container, self.workdir)

    def roles_on(self, node: str) -> list[str]:
        return [role for role, nodes in self.placement.items() if node in nodes]

    def log_files(self, role: str) -> list[Path]:
        return sorted(p for node in self.placement.get(role, [])
                      for p in (Path(self.log_dir) / f"{node}-{role}.out", Path(self.log_dir) / f"{node}-{role}.err"))


def path(project: str) -> Path:
    return runstate.project_dir(project) / "slurm" / RECORD_NAME


def save(record: JobRecord) -> None:
    p = path(record.project)
    p.parent.mkdir(parents=True, exist_ok=True)
    data = {modes.record_key() if k == "mode" else k: v for k, v in asdict(record).items()}
    p.write_text(json.dumps(data, indent=2) + "\n")


def load(project: str) -> JobRecord | None:
    p = path(project)
    if not p.is_file():
        return None
    fields = {"mode" if k == modes.record_key() else k: v for k, v in json.loads(p.read_text()).items()}
    # A record written before the client named its container held `docker exec ... CONTAINER` instead.
    prefix = fields.pop("client_prefix", None)
    if prefix is not None and "client_container" not in fields:
        fields["client_container"] = prefix[-1] if prefix else None
    return JobRecord(**fields)


def forget(project: str) -> None:
    path(project).unlink(missing_ok=True)


def wait_allocated(client: SlurmClient, job_id: str, *, timeout: float, report) -> list[str]:
    """The job's node list once it runs; a BundleError if it ends or waits past `timeout`."""
    deadline, said = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        fields = client.job(job_id)
        state = fields.get("JobState", "")
        if state == "RUNNING":
            return client.hostnames(fields["NodeList"])
        if state in ENDED:
            raise Failed(f"job {job_id} ended before it ran: {state} ({fields.get('Reason', '')})")
        line = f"job {job_id}: {state or 'unknown'} ({fields.get('Reason', '')})"
        if line != said:
            report(line)
            said = line
        time.sleep(1)
    raise TimedOut(f"job {job_id} was not given its nodes within {timeout:.0f} s")


def lost_roles(record: JobRecord, *, starting: set[str] | None = None) -> dict[str, str]:
    """Role -> why it is lost (its node down, or its step gone), from Slurm's own view. `starting`:
    roles whose step may not be listed yet (a launch's first seconds); those listed are removed."""
    client = record.client
    fields = client.job(record.job_id)
    state = fields.get("JobState", "")
    if state != "RUNNING":
        return {role: f"job {record.job_id} is {state or 'gone'}" for role in record.placement}
    nodes = client.nodes(record.nodes)
    steps = client.steps(record.job_id)
    lost = {}
    for role, where in record.placement.items():
        down = [n for n in where if not nodes.get(n, ("",))[0].startswith(("alloc", "mix", "idle", "completing"))]
        if down:
            lost[role] = ", ".join(f"node {n} {nodes.get(n, ('unknown', ''))[0]} ({nodes.get(n, ('', ''))[1] or 'no reason'})"
                                   for n in down)
        elif role not in steps and (starting is None or role not in starting):
            lost[role] = f"its step is no longer running (job {record.job_id})"
        elif starting is not None and role in steps:
            starting.discard(role)
    return lost
