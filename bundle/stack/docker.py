"""The compose project side of the Docker boundary (python-on-whales): a `Stack` is one compose project
(up, down, ps, logs, exec, one-off tool containers), found by compose's labels. The engine and images
side, and the one client both use, is bundle/stack/engine.py.

Everything here gives plain Python values or a `BundleError` back: no python-on-whales type and no
DockerException leaks out (engine.docker_errors() turns one into the other).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from python_on_whales.exceptions import DockerException, NoSuchContainer, NoSuchNetwork, NoSuchVolume
from python_on_whales.utils import run as _run_docker

from bundle import log_lines
from bundle.errors import EnvironmentProblem
from bundle.log_lines import LogLine, Stamp
from bundle.stack import engine
from bundle.stack.engine import docker_errors, first_line


@dataclass(frozen=True)
class ContainerState:
    name: str
    service: str
    state: str  # running, exited, restarting, ...
    health: str  # healthy, unhealthy, starting, or '' without a healthcheck
    exit_code: int | None
    restart_count: int
    ports: dict[str, list[str]]  # "30000/tcp" -> ["127.0.0.1:30000"]
    config_hash: str = ""  # compose's com.docker.compose.config-hash label: the config it was made from
    image_id: str = ""  # the image it runs (sha256:...)


# A container can vanish between compose's listing and the inspect that reads it (compose recreating
# it, an operator's `docker rm`): the listing is taken again, this many times at most.
STATE_READ_ATTEMPTS = 5
STATE_READ_PAUSE_S = 0.5


class Stack:
    """One compose project: the topology's compose files plus the rendered env file."""

    def __init__(self, project: str, files: list[Path], env_file: Path, profiles: list[str] | None = None):
        self.project = project
        self.files = [Path(f) for f in files]
        self.env_file = Path(env_file)
        self._docker = engine.client(
            compose_files=self.files,
            compose_env_files=[self.env_file],
            compose_project_name=project,
            compose_profiles=profiles or [],
        )

    def _call(self, what: str, fn, *args, **kwargs):
        with docker_errors(f"docker compose {what} failed for project {self.project!r}", detail="all"):
            return fn(*args, **kwargs)

    def config(self) -> dict:
        """Compose's own resolved view of the project (`docker compose config --format json`)."""
        return self._call("config", self._docker.compose.config, return_json=True)

    def config_hashes(self) -> dict[str, str]:
        """service -> the config hash compose would label its container with now (`docker compose config
        --hash '*'`): a container whose label differs is one `compose up` recreates."""
        cmd = self._docker.compose.docker_compose_cmd + ["config", "--hash", "*"]
        text = self._call("config --hash", _run_docker, cmd, capture_stdout=True) or ""
        return dict(line.split(maxsplit=1) for line in log_lines.lines(text) if len(line.split()) == 2)

    def volumes_to_create(self) -> list[str]:
        """The named volumes `compose up` would create now: declared by the project (not external)
        and not on the engine yet."""
        declared = {spec.get("name") or f"{self.project}_{key}"
                    for key, spec in (self.config().get("volumes") or {}).items()
                    if not (spec or {}).get("external")}
        existing = set(_listed_names("volumes", self._docker.volume.list))
        return sorted(declared - existing)

    def service_image_ids(self, services) -> dict[str, str]:
        """service -> the id of the image its tag names now (an image rebuilt under the same tag
        differs from what its container runs: compose recreates it)."""
        declared = self.config().get("services", {})
        out = {}
        for service in services:
            ref = declared.get(service, {}).get("image")
            facts = engine.image_facts(ref) if ref else None
            if facts is not None:
                out[service] = facts.id
        return out

    def up(self, services: list[str] | None = None, *, build: bool = False, dependencies: bool = True,
           recreate: bool = True) -> None:
        """`compose up -d`; `dependencies=False` is `--no-deps` (only the named services are touched:
        a plain `up` of a worker would also restart the router, which depends on it with restart:
        true), `recreate=False` is `--no-recreate`."""
        # None means every service: python-on-whales treats an empty list as "start nothing".
        self._call("up", self._docker.compose.up, services or None, detach=True, build=build,
                   remove_orphans=dependencies, quiet=True, dependencies=dependencies, recreate=recreate)

    def down(self, *, volumes: bool = False, timeout: int | None = None) -> bool:
        """Containers and network removed (one-off containers too); the volumes only with `volumes`.
        Returns whether the volumes went too, so the caller says what was kept."""
        self._call("down", self._docker.compose.down, remove_orphans=True, volumes=volumes,
                   timeout=timeout, quiet=True)
        # `compose down` leaves one-off containers of a service whose profile is not active (the
        # bench tool's `compose run`): they belong to the project too, and must not outlive it.
        left = project_containers(self.project)
        if left:
            try:
                self._docker.container.remove(left, force=True, volumes=volumes)
            except DockerException:
                pass  # the caller lists what is still there
        # Compose could not remove the project's network while such a container was still attached.
        for network in project_networks(self.project):
            try:
                self._docker.network.remove(network)
            except DockerException:
                pass  # the caller lists what is still there
        return volumes

    def states(self) -> list[ContainerState]:
        """Every container of the project, stopped ones too. A container that vanishes between the
        listing and its inspect (compose recreated it) makes it list again: never a crash. So does one
        that vanishes inside `compose ps` itself, which inspects what it listed ("No such container",
        seen in CI while a reconcile recreated decode)."""
        for attempt in range(STATE_READ_ATTEMPTS):
            if attempt:
                time.sleep(STATE_READ_PAUSE_S)  # compose is removing and creating: give it a moment
            with docker_errors(f"docker compose ps failed for project {self.project!r}", detail="all"):
                try:
                    containers = self._docker.compose.ps(all=True)
                except NoSuchContainer:
                    continue
            try:
                with_states = [_state_of(c) for c in containers]
            except _Vanished:
                continue
            return with_states
        raise EnvironmentProblem(f"docker compose ps for project {self.project!r}: its containers kept changing "
                                 f"while being read ({STATE_READ_ATTEMPTS} listings)",
                                 hint="run the command again once compose has finished")

    def logs(self, service: str | None = None, *, tail: int | None = None, follow: bool = False,
             timestamps: bool = False) -> str | Iterator:
        kwargs = dict(tail=str(tail) if tail else None, follow=follow, timestamps=timestamps,
                      stream=follow)
        return self._call("logs", self._docker.compose.logs, [service] if service else [], **kwargs)

    def container_logs(self, container_name: str) -> str:
        """The container's whole log, one stamped line each, a progress bar at its last state."""
        try:
            text = self._docker.container.logs(container_name, timestamps=True)
        except DockerException as exc:
            return f"(logs unavailable: {first_line(exc.stderr)})"
        return "".join(f"{line.stamp.text} {line.text}\n" if line.stamp else f"{line.text}\n"
                       for line in log_lines.stamped_lines(text))

    def container_log_lines(self, container_name: str, *, since: Stamp | None = None) -> list[LogLine]:
        """Each line logged after `since` (a stamp of a complete line this returned before), read by
        bundle.log_lines' rules: no log line, a progress bar's included, can break the reading.

        `docker logs --since` counts whole microseconds and includes its bound, so lines at or
        before `since` are dropped here: each line is seen once, and a poll costs only what is new.
        A last line still without its newline comes back too (marked incomplete): move `since`
        only past complete lines, and the rest of it is read again when it is done.
        """
        kwargs = {"since": since.as_datetime()} if since else {}
        try:
            text = self._docker.container.logs(container_name, timestamps=True, **kwargs)
        except DockerException:
            return []
        return [line for line in log_lines.stamped_lines(text)
                if not (since and line.stamp is not None and line.stamp <= since)]

    def exits(self, since) -> list[tuple[str, int]]:
        """(service, exit code) of every container of the project that died since `since` (a
        datetime), oldest first, from the engine's events: a restarted container's own state has
        already forgotten the exit code by the time it runs again."""
        from datetime import datetime, timezone

        try:
            events = self._docker.system.events(since=since, until=datetime.now(timezone.utc), filters={
                "label": f"com.docker.compose.project={self.project}", "event": "die"})
            found = [(e.actor.attributes.get("com.docker.compose.service", ""),
                      int(e.actor.attributes.get("exitCode", "0"))) for e in events]
        except (DockerException, ValueError):
            return []
        return found

    def exec(self, service: str, command: list[str], *, env: dict[str, str] | None = None) -> str:
        return self._call("exec", self._docker.compose.execute, service, command, tty=False,
                          envs=env or {})

    def run(self, service: str, command: list[str], *, env: dict[str, str] | None = None,
            volumes: list[tuple[str, str]] | None = None) -> str:
        """A one-off container of `service` (removed afterwards) running `command`."""
        return self._call("run", self._docker.compose.run, service, command, remove=True, tty=False,
                          detach=False, envs=env or {}, volumes=volumes or [], dependencies=False)

    def run_tool(self, service: str, command: list[str], *, name: str, timeout: float,
                 volumes: list[tuple[str, ...]] | None = None, env: dict[str, str] | None = None,
                 user: str | None = None, on_line=None) -> "ToolRun":
        """A one-off container `name` of `service` with a time limit; never raises for its exit.

        Past `timeout` only this container is killed (the stack is untouched), and whatever it
        printed until then is returned. `on_line(text)` sees each output line as it comes.
        """
        import threading

        timed_out = threading.Event()

        def kill():
            timed_out.set()
            engine.kill_quietly(self._docker, name)

        killer = threading.Timer(timeout, kill)
        lines: list[str] = []
        exit_code = 0
        # stdout and stderr come as separate chunks: one splitter each, or a line of one would be cut
        # by a chunk of the other.
        splitters: dict[str, log_lines.LineSplitter] = {}
        killer.start()
        try:
            stream = self._docker.compose.run(service, command, name=name, remove=True, tty=False,
                                              detach=False, stream=True, envs=env or {},
                                              volumes=volumes or [], dependencies=False, user=user)
            for source, chunk in stream:
                for line in splitters.setdefault(source, log_lines.LineSplitter()).feed(chunk):
                    _keep(lines, line, on_line)
        except DockerException as exc:  # its stderr was streamed into `lines` already
            exit_code = exc.return_code or 1
        finally:
            killer.cancel()
        for splitter in splitters.values():
            for line in splitter.flush():
                _keep(lines, line, on_line)
        return ToolRun(exit_code=exit_code, output="\n".join(lines), timed_out=timed_out.is_set())


def _keep(lines: list[str], line: str, on_line) -> None:
    lines.append(line)
    if on_line:
        on_line(line)


def stack_of(rendered) -> Stack:
    """The compose project a render describes (bundle.render.compose.Rendered, once written)."""
    return Stack(rendered.project, list(rendered.compose_files), rendered.env_file,
                 profiles=list(rendered.profiles))


@dataclass(frozen=True)
class ToolRun:
    exit_code: int
    output: str  # stdout and stderr as the container printed them
    timed_out: bool


def _state_of(container) -> ContainerState:
    """Raises _Vanished for a container gone since it was listed (states() lists again); any other
    failure of the inspect becomes a BundleError."""
    with docker_errors(f"cannot inspect container {str(container.id)[:12]}"):
        try:
            return _read_state(container)
        except NoSuchContainer as exc:
            raise _Vanished(container.id) from exc


class _Vanished(Exception):
    """A listed container that was gone by the time it was inspected (not a DockerException: it
    passes the funnel to states(), which lists again)."""


def _read_state(container) -> ContainerState:
    st = container.state
    health = st.health.status if st.health is not None else ""
    ports = {}
    for key, bindings in (container.network_settings.ports or {}).items():
        ports[key] = [f"{b['HostIp']}:{b['HostPort']}" for b in (bindings or [])]
    return ContainerState(
        name=container.name,
        service=container.config.labels.get("com.docker.compose.service", ""),
        state=st.status,
        health=health or "",
        exit_code=st.exit_code,
        restart_count=container.restart_count or 0,
        ports=ports,
        config_hash=container.config.labels.get("com.docker.compose.config-hash", ""),
        image_id=container.image or "",
    )


def project_containers(project: str) -> list[str]:
    """Names of every container (running or stopped) of compose project `project`."""
    return _listed_names("containers", lambda: engine.client().container.list(
        all=True, filters=[("label", f"com.docker.compose.project={project}")]))


def project_volumes(project: str) -> list[str]:
    """Names of every volume of compose project `project`."""
    return _listed_names("volumes", lambda: engine.client().volume.list(
        filters=[("label", f"com.docker.compose.project={project}")]))


def project_networks(project: str) -> list[str]:
    """Names of every network of compose project `project`."""
    return _listed_names("networks", lambda: engine.client().network.list(
        filters=[("label", f"com.docker.compose.project={project}")]))


def _listed_names(what: str, list_them) -> list[str]:
    """The names of what `list_them()` lists. Reading a name inspects the object: one removed since
    the listing (compose recreating a container, a down in progress) makes it list again."""
    for _ in range(STATE_READ_ATTEMPTS):
        with docker_errors(f"cannot list {what}"):
            listed = list_them()
            try:
                return sorted(item.name for item in listed)
            except (NoSuchContainer, NoSuchVolume, NoSuchNetwork):
                continue
    raise EnvironmentProblem(f"cannot list {what}: they kept changing while being read ({STATE_READ_ATTEMPTS} listings)",
                             hint="run the command again")
