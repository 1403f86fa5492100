"""A scripted stand-in for python-on-whales' DockerClient, the driver's one boundary with Docker
(bundle.stack.engine.client), so launch's readiness loop, status and the other orchestration can be
driven in-process: each `compose ps` returns the next scripted snapshot of the project's containers
(the last one repeats), container logs grow with the snapshots, and `docker events` gives the exits.

Everything above python-on-whales is the driver's real code (Stack, its parsing of container state,
log paging by timestamp, exit events)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace


@dataclass
class C:
    """One container as a snapshot shows it."""

    service: str
    state: str = "running"
    health: str | None = "healthy"  # None: no healthcheck
    restarts: int = 0
    exit_code: int | None = 0
    logs: tuple[str, ...] = ()  # lines logged since the previous snapshot
    ports: dict = field(default_factory=dict)
    config_hash: str = ""  # compose's config-hash label
    image_id: str = "sha256:1"


def _container(project: str, c: C):
    return SimpleNamespace(
        id=f"{project}-{c.service}-1-id", image=c.image_id,
        name=f"{project}-{c.service}-1",
        state=SimpleNamespace(status=c.state, exit_code=c.exit_code,
                              health=None if c.health is None else SimpleNamespace(status=c.health)),
        network_settings=SimpleNamespace(ports=c.ports),
        config=SimpleNamespace(labels={"com.docker.compose.service": c.service,
                                       "com.docker.compose.project": project,
                                       "com.docker.compose.config-hash": c.config_hash}),
        restart_count=c.restarts,
    )


class FakeEngine:
    """The project's containers over time: `snapshots[i]` is what the i-th `compose ps` sees."""

    def __init__(self, project: str, snapshots: list[list[C]], *, exits: list[tuple[str, int]] = (),
                 up_error: Exception | None = None, ports: dict[str, int] | None = None):
        self.project = project
        # service -> a port on 127.0.0.1 where a real process (a worker simulator) stands in for
        # that container's server: `compose exec SERVICE curl ...` runs that curl here, against it.
        self.ports = ports or {}
        self.snapshots = snapshots
        self.exits = list(exits)
        self.up_error = up_error
        self.polls = 0
        self.calls: list[str] = []
        self.ups: list[tuple] = []  # (services, dependencies, recreate) of each `compose up`
        self._log: dict[str, list[tuple[str, str]]] = {}
        self._clock = datetime(2026, 1, 1, tzinfo=timezone.utc)

    # -- python-on-whales' surface the driver uses --
    def client(self, **_kwargs):
        engine = self
        compose = SimpleNamespace(ps=engine._ps, up=engine._up, down=engine._down, execute=engine._execute)
        container = SimpleNamespace(logs=engine._logs, list=engine._list, remove=lambda *a, **k: None)
        system = SimpleNamespace(events=engine._events, info=lambda: SimpleNamespace(server_version="fake"))
        # The CLI calls python-on-whales has no method for (`docker top`) run this command: a docker that
        # knows no such container, as a real engine answers for these made-up names.
        config = SimpleNamespace(docker_cmd=["sh", "-c", "echo 'Error: No such container' >&2; exit 1", "docker"])
        return SimpleNamespace(compose=compose, container=container, system=system, client_config=config)

    def _ps(self, all: bool = False):  # noqa: A002 (python-on-whales' name)
        self.calls.append("ps")
        snapshot = self.snapshots[min(self.polls, len(self.snapshots) - 1)]
        if self.polls < len(self.snapshots):
            for c in snapshot:
                for line in c.logs:
                    self._clock += timedelta(milliseconds=1)
                    stamp = self._clock.strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
                    self._log.setdefault(f"{self.project}-{c.service}-1", []).append((stamp, line))
        self.polls += 1
        return [_container(self.project, c) for c in snapshot]

    def _up(self, services=None, **kwargs):
        self.calls.append("up")
        self.ups.append((services, kwargs.get("dependencies", True), kwargs.get("recreate", True)))
        if self.up_error is not None:
            raise self.up_error

    def _down(self, **_kwargs):
        self.calls.append("down")

    def _logs(self, name: str, *, timestamps: bool = False, since=None):
        lines = self._log.get(name, [])
        return "\n".join(f"{stamp} {line}" for stamp, line in lines)

    def _current(self) -> list[C]:
        return self.snapshots[min(max(self.polls - 1, 0), len(self.snapshots) - 1)]

    def _list(self, all: bool = False, filters=()):  # noqa: A002
        if ("label", f"com.docker.compose.project={self.project}") not in list(filters):
            return []
        return [_container(self.project, c) for c in self._current()]

    def _execute(self, service: str, command: list[str], *, tty: bool = False, envs=None):
        """The command runs on this host with the container's 127.0.0.1:<port> pointed at the
        process standing in for it; a container that is not running refuses, as Docker does."""
        import subprocess

        from python_on_whales.exceptions import DockerException

        self.calls.append(f"exec {service}")
        state = next((c.state for c in self._current() if c.service == service), None)
        if state != "running":
            raise DockerException(["docker", "compose", "exec", service], 1, b"",
                                  f"service {service!r} is not running (state {state})".encode())
        port = self.ports[service]
        local = [re.sub(r"//127\.0\.0\.1:\d+", f"//127.0.0.1:{port}", part) for part in command]
        proc = subprocess.run(local, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise DockerException(["docker", "compose", "exec", service, *command], proc.returncode,
                                  proc.stdout.encode(), proc.stderr.encode())
        return proc.stdout

    def _events(self, **_kwargs):
        return [SimpleNamespace(actor=SimpleNamespace(attributes={"com.docker.compose.service": service,
                                                                  "exitCode": str(code)}))
                for service, code in self.exits]
