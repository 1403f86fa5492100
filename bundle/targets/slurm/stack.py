"""The verbs' view of a job on the container cluster, in the shape of a compose project (bundle.stack.
docker.Stack): a role is a "service". `exec` runs in the node container that holds the role's first
node; `states` are the roles' as Slurm sees them (a lost node or step is not "running"); `logs` are
the job's per-node files; `run_tool` is the cluster project's bench tool; `down` cancels the job and
removes the cluster. So status, logs, smoke and bench work unchanged on it."""

from __future__ import annotations

from pathlib import Path

from bundle import log_lines
from bundle.errors import BundleError
from bundle.targets.slurm import job as jobs
from bundle.targets.slurm.cluster import Cluster
from bundle.stack import docker


class SlurmClusterStack(docker.Stack):
    def __init__(self, project: str):
        self.cluster = Cluster(project)
        super().__init__(project, [Path(f) for f in self.cluster.stack().files], self.cluster.env_file)
        self.record = jobs.load(project)

    def _node_service(self, role: str) -> str:
        if self.record is None or role not in self.record.placement:
            return role  # a cluster service itself (slurmctld, node-1 ...)
        return self.record.placement[role][0]

    def exec(self, service: str, command: list[str], *, env: dict[str, str] | None = None) -> str:
        return super().exec(self._node_service(service), command, env=env)

    def states(self) -> list[docker.ContainerState]:
        nodes = {s.service: s for s in super().states()}
        if self.record is None:
            return list(nodes.values())
        try:
            lost = jobs.lost_roles(self.record)
        except BundleError as exc:
            lost = {role: exc.message for role in self.record.placement}
        out = []
        for role, where in self.record.placement.items():
            node = nodes.get(where[0])
            running = node is not None and node.state == "running" and role not in lost
            out.append(docker.ContainerState(
                name=node.name if node else where[0], service=role,
                state="running" if running else "lost",
                health="" if running else lost.get(role, "its node's container is gone"),
                exit_code=None if running else (node.exit_code if node else None), restart_count=0,
                ports=node.ports if node and role == "router" else {}))
        return out

    def logs(self, service: str | None = None, *, tail: int | None = None, follow: bool = False,
             timestamps: bool = False) -> str:
        if self.record is None:
            return super().logs(service, tail=tail, follow=follow, timestamps=timestamps)
        roles = [service] if service else list(self.record.placement)
        chunks = []
        for role in roles:
            for path in self.record.log_files(role):
                if path.is_file():
                    lines = log_lines.lines(path.read_text(errors="replace"))
                    lines = lines[-tail:] if tail else lines
                    chunks.append("".join(f"{role} | {path.name} | {line}\n" for line in lines))
        return "".join(chunks)

    def down(self, *, volumes: bool = False, timeout: int | None = None) -> bool:
        """The job cancelled and the whole cluster removed, its volumes (the nodes' state) included:
        a container cluster keeps no cache across launches. Returns True: the volumes went."""
        if self.record is not None:
            try:
                self.record.client.scancel(self.record.job_id)
            except BundleError:
                pass  # the controller is gone already: removing the cluster ends the job with it
            jobs.forget(self.project)
        self.cluster.down()
        return True


def job_summary(project: str) -> dict | None:
    """What `bundle status` adds for a Slurm job: squeue's line, each node's state, the roles lost
    and why, and where the job's logs are; None without a job record."""
    record = jobs.load(project)
    if record is None:
        return None
    client = record.client
    out = {"job_id": record.job_id, "placement": record.placement, "log_dir": record.log_dir}
    try:
        out["queue"] = client.queue(record.job_id).rstrip()
        out["nodes"] = {n: {"state": s, "reason": r} for n, (s, r) in client.nodes(record.nodes).items()}
        out["lost"] = jobs.lost_roles(record)
        out["accounting"] = client.accounting(record.job_id)  # None without slurmdbd (the container cluster)
    except BundleError as exc:
        out["error"] = exc.message
    return out
