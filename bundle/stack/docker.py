"""The only module that talks to Docker (through python-on-whales).

Everything else asks this module for a `Stack` (one compose project) or an engine fact, and gets
plain Python values or a `BundleError` back: no python-on-whales type leaks out of here.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from python_on_whales import DockerClient
from python_on_whales.exceptions import DockerException

from bundle.errors import EXIT_ENVIRONMENT, EXIT_FAILED, BundleError

def _debug() -> bool:
    return os.environ.get("BUNDLE_DEBUG") == "1"


def client(**compose_settings) -> DockerClient:
    return DockerClient(debug=_debug(), **compose_settings)


def require_engine() -> None:
    """Raise a BundleError naming the fix when no Docker engine answers."""
    if shutil.which("docker") is None:
        raise BundleError("the `docker` command is not installed", exit_code=EXIT_ENVIRONMENT,
                          hint="install Docker Engine (https://docs.docker.com/engine/install/)")
    try:
        client().system.info()
    except DockerException as exc:
        raise BundleError(f"no Docker engine answers: {_first_line(exc.stderr)}",
                          exit_code=EXIT_ENVIRONMENT,
                          hint="start the daemon (`systemctl start docker`) or set DOCKER_HOST") from None


def require_compose() -> None:
    if not client().compose.is_installed():
        raise BundleError("the Docker Compose v2 plugin (`docker compose`) is not installed",
                          exit_code=EXIT_ENVIRONMENT,
                          hint="install docker-compose-plugin, or run `make install` which adds it "
                               "to ~/.docker/cli-plugins")


def engine_versions() -> dict[str, str]:
    """Server and compose versions as strings ('' where unknown)."""
    out = {"engine": "", "compose": ""}
    try:
        out["engine"] = client().version().server.version or ""
    except DockerException:
        pass
    try:
        out["compose"] = client().compose.version().removeprefix("Docker Compose version ").strip()
    except DockerException:
        pass
    return out


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else "(no output)"


@dataclass(frozen=True)
class ContainerState:
    name: str
    service: str
    state: str  # running, exited, restarting, ...
    health: str  # healthy, unhealthy, starting, or '' without a healthcheck
    exit_code: int | None
    restart_count: int
    ports: dict[str, list[str]]  # "30000/tcp" -> ["127.0.0.1:30000"]


class Stack:
    """One compose project: the topology's compose files plus the rendered env file."""

    def __init__(self, project: str, files: list[Path], env_file: Path, profiles: list[str] | None = None):
        self.project = project
        self.files = [Path(f) for f in files]
        self.env_file = Path(env_file)
        self._docker = client(
            compose_files=self.files,
            compose_env_files=[self.env_file],
            compose_project_name=project,
            compose_profiles=profiles or [],
        )

    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except DockerException as exc:
            detail = (exc.stderr or exc.stdout or "").strip()
            raise BundleError(f"docker compose {what} failed for project {self.project!r}:\n{detail}",
                              exit_code=EXIT_ENVIRONMENT) from None

    def config(self) -> dict:
        """Compose's own resolved view of the project (`docker compose config --format json`)."""
        return self._call("config", self._docker.compose.config, return_json=True)

    def up(self, services: list[str] | None = None, *, build: bool = False) -> None:
        # None means every service: python-on-whales treats an empty list as "start nothing".
        self._call("up", self._docker.compose.up, services or None, detach=True, build=build,
                   remove_orphans=True, quiet=True)

    def down(self, *, volumes: bool = False, timeout: int | None = None) -> None:
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

    def states(self) -> list[ContainerState]:
        """Every container of the project, stopped ones too."""
        containers = self._call("ps", self._docker.compose.ps, all=True)
        return [_state_of(c) for c in containers]

    def logs(self, service: str | None = None, *, tail: int | None = None, follow: bool = False,
             timestamps: bool = False) -> str | Iterator:
        kwargs = dict(tail=str(tail) if tail else None, follow=follow, timestamps=timestamps,
                      stream=follow)
        return self._call("logs", self._docker.compose.logs, [service] if service else [], **kwargs)

    def container_logs(self, container_name: str) -> str:
        try:
            return self._docker.container.logs(container_name, timestamps=True)
        except DockerException as exc:
            return f"(logs unavailable: {_first_line(exc.stderr)})"

    def container_log_lines(self, container_name: str, *, since: str | None = None) -> list[tuple[str, str]]:
        """(timestamp, line) for each line logged after `since` (a timestamp this returned before).

        `docker logs --since` counts whole microseconds and includes its bound, so lines at or
        before `since` are dropped here: each line is seen once, and a poll costs only what is new.
        """
        from datetime import datetime

        kwargs = {}
        if since:
            kwargs["since"] = datetime.fromisoformat(since[:26].rstrip("Z") + "+00:00")
        try:
            text = self._docker.container.logs(container_name, timestamps=True, **kwargs)
        except DockerException:
            return []
        out = []
        for raw in text.splitlines():
            stamp, _, line = raw.partition(" ")
            if since and stamp <= since:
                continue
            out.append((stamp, line))
        return out

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
            _kill_quietly(self._docker, name)

        killer = threading.Timer(timeout, kill)
        lines: list[str] = []
        exit_code = 0
        killer.start()
        try:
            stream = self._docker.compose.run(service, command, name=name, remove=True, tty=False,
                                              detach=False, stream=True, envs=env or {},
                                              volumes=volumes or [], dependencies=False, user=user)
            for _source, chunk in stream:
                for line in chunk.decode(errors="replace").splitlines():
                    lines.append(line)
                    if on_line:
                        on_line(line)
        except DockerException as exc:  # its stderr was streamed into `lines` already
            exit_code = exc.return_code or 1
        finally:
            killer.cancel()
        return ToolRun(exit_code=exit_code, output="\n".join(lines), timed_out=timed_out.is_set())


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
    )


def project_containers(project: str) -> list[str]:
    """Names of every container (running or stopped) of compose project `project`."""
    try:
        containers = client().container.list(
            all=True, filters=[("label", f"com.docker.compose.project={project}")])
    except DockerException as exc:
        raise BundleError(f"cannot list containers: {_first_line(exc.stderr)}",
                          exit_code=EXIT_ENVIRONMENT) from None
    return sorted(c.name for c in containers)


def project_networks(project: str) -> list[str]:
    """Names of every network of compose project `project`."""
    try:
        networks = client().network.list(filters=[("label", f"com.docker.compose.project={project}")])
    except DockerException as exc:
        raise BundleError(f"cannot list networks: {_first_line(exc.stderr)}",
                          exit_code=EXIT_ENVIRONMENT) from None
    return sorted(n.name for n in networks)


def image_exists(ref: str) -> bool:
    return client().image.exists(ref)


# ---- engine facts for `bundle doctor` ----

@dataclass(frozen=True)
class EngineInfo:
    server_version: str
    runtimes: tuple[str, ...]  # "runc", "nvidia", ...
    default_runtime: str
    root_dir: str  # where images and volumes live (/var/lib/docker)


def engine_info() -> EngineInfo:
    """What `docker info` says; a BundleError when no engine answers."""
    require_engine()
    info = client().system.info()
    return EngineInfo(server_version=info.server_version or "",
                      runtimes=tuple(sorted((info.runtimes or {}).keys())),
                      default_runtime=info.default_runtime or "",
                      root_dir=str(info.docker_root_dir or ""))


def containers_publishing(port: int) -> list[str]:
    """Names of running containers that publish host `port` (docker-proxy owns it on their behalf)."""
    try:
        containers = client().container.list(filters={"publish": str(port)})
    except DockerException:
        return []
    return sorted(c.name for c in containers)


def run_probe_container(image: str, command: list[str], *, probe_file: Path, probe_target: str,
                        env: dict[str, str], gpus: bool, timeout: float) -> str:
    """Run `command` once in `image` with one host file mounted read-only; return stdout+stderr.

    The container gets what compose gives the workers (host IPC, unlimited memlock) so a probe sees
    the transports a worker would. A non-zero exit is not an error here: the output says why.
    """
    import threading
    import uuid

    name = f"bundle-probe-{uuid.uuid4().hex[:8]}"
    docker = client()
    killer = threading.Timer(timeout, lambda: _kill_quietly(docker, name))
    killer.start()
    try:
        return docker.run(image, command[1:], entrypoint=command[0], name=name, remove=True,
                          gpus="all" if gpus else None, ipc="host", ulimit=["memlock=-1"],
                          envs=env, volumes=[(str(probe_file), probe_target, "ro")])
    except DockerException as exc:
        return f"{exc.stdout or ''}\n{exc.stderr or ''}\n(docker run exited {exc.return_code})"
    finally:
        killer.cancel()


def _kill_quietly(docker: DockerClient, name: str) -> None:
    try:
        docker.container.kill(name)
    except DockerException:
        pass


# ---- images: `bundle audit` ----

@dataclass(frozen=True)
class AuditRun:
    returncode: int | None  # None: killed at the time limit
    output: str  # stdout + stderr (the probe's facts go to a mounted file, not here)


def run_audit_container(image: str, command: list[str], *, volumes: list[tuple[Path, str, str]],
                        env: dict[str, str], timeout: float, user: str | None = None) -> AuditRun:
    """Run `command` once in a throw-away container of `image` with no network (the audit must not
    reach anything, and proves imports work offline), the given host folders mounted, and killed
    after `timeout` s. A non-zero exit is returned, not raised: the caller says what it means."""
    import threading
    import uuid

    require_engine()
    if not image_exists(image):
        raise BundleError(f"image {image} is not here", exit_code=EXIT_ENVIRONMENT,
                          hint="build it (`bundle build`, or `bundle build --standin` without a GPU) "
                               "or pull it (`bundle pull`), or name another with --image REF")
    name = f"bundle-audit-{uuid.uuid4().hex[:8]}"
    docker = client()
    killer = threading.Timer(timeout, lambda: _kill_quietly(docker, name))
    killer.start()
    try:
        out = docker.run(image, command[1:], entrypoint=command[0], name=name, remove=True,
                         networks=["none"], envs=env, user=user,
                         volumes=[(str(src), target, mode) for src, target, mode in volumes])
        return AuditRun(0, out or "")
    except DockerException as exc:
        killed = not killer.is_alive() and exc.return_code in (137, 143)
        return AuditRun(None if killed else exc.return_code, f"{exc.stdout or ''}\n{exc.stderr or ''}")
    finally:
        killer.cancel()


def run_networked_tool(image: str, command: list[str], *, env: dict[str, str],
                       volumes: list[tuple[Path, str, str]], timeout: float) -> str:
    """Run `command` once in a throw-away container of `image` on the default network (for tools
    that reach outside: `bundle model pin/fetch` and the Hugging Face Hub); stdout + stderr, a
    non-zero exit included (the caller reads the output for its marker line)."""
    import threading
    import uuid

    require_engine()
    name = f"bundle-tool-{uuid.uuid4().hex[:8]}"
    docker = client()
    killer = threading.Timer(timeout, lambda: _kill_quietly(docker, name))
    killer.start()
    try:
        return docker.run(image, command[1:], entrypoint=command[0], name=name, remove=True, envs=env,
                          user="0", volumes=[(str(src), target, mode) for src, target, mode in volumes]) or ""
    except DockerException as exc:
        return f"{exc.stdout or ''}\n{exc.stderr or ''}\n(exit {exc.return_code})"
    finally:
        killer.cancel()


@dataclass(frozen=True)
class ContainerImage:
    container: str
    running: bool
    image_id: str
    image_ref: str  # what the container was created from (Config.Image)
    labels: dict[str, str]  # the container's labels (an image's labels are copied onto it)


def container_image(name: str) -> ContainerImage:
    try:
        c = client().container.inspect(name)
    except DockerException as exc:
        raise BundleError(f"cannot inspect container {name}: {_first_line(exc.stderr)}",
                          exit_code=EXIT_ENVIRONMENT) from None
    return ContainerImage(container=name, running=bool(c.state.running), image_id=str(c.image),
                          image_ref=str(c.config.image or ""), labels=dict(c.config.labels or {}))


def exec_in_container(name: str, command: list[str]) -> AuditRun:
    """Run `command` in the running container `name` (`docker exec`, as its own user); a non-zero
    exit is returned, not raised. Used by `bundle verify` to read a live container's installed set."""
    try:
        return AuditRun(0, client().container.execute(name, command) or "")
    except DockerException as exc:
        return AuditRun(exc.return_code, f"{exc.stdout or ''}\n{exc.stderr or ''}")


# ---- images: `bundle pull` ----

@dataclass(frozen=True)
class ImageFacts:
    id: str
    repo_digests: tuple[str, ...]  # "repo@sha256:..." for each registry it was pulled from/pushed to
    labels: dict[str, str]


def image_facts(ref: str) -> ImageFacts | None:
    """The local image `ref` (name:tag, name@digest or id), or None when it is not here."""
    docker = client()
    if not docker.image.exists(ref):
        return None
    image = docker.image.inspect(ref)
    return ImageFacts(id=image.id, repo_digests=tuple(image.repo_digests or ()),
                      labels=dict(image.config.labels or {}))


def pull_image(ref: str) -> None:
    try:
        client().image.pull(ref, quiet=True)
    except DockerException as exc:
        detail = (exc.stderr or exc.stdout or "").strip()
        raise BundleError(f"docker pull {ref} failed:\n{detail}", exit_code=EXIT_ENVIRONMENT,
                          hint="check the registry is reachable and you are logged in "
                               "(`docker login <registry>`)") from None


def tag_image(source: str, target: str) -> None:
    client().image.tag(source, target)


def remove_image_ref(ref: str) -> None:
    """Remove one reference (tag or digest); the image's data goes only when nothing else names it."""
    try:
        client().image.remove(ref, force=False, prune=True)
    except DockerException as exc:
        raise BundleError(f"could not remove image {ref}: {_first_line(exc.stderr)}",
                          exit_code=EXIT_ENVIRONMENT, hint=f"remove it by hand: docker image rm {ref}") from None


def push_image(ref: str) -> None:
    """`docker push ref`; the engine then records `<repo>@<digest>` among the image's RepoDigests."""
    try:
        client().image.push(ref, quiet=True)
    except DockerException as exc:
        detail = (exc.stderr or exc.stdout or "").strip()
        raise BundleError(f"docker push {ref} failed:\n{detail}", exit_code=EXIT_ENVIRONMENT,
                          hint="log in to the registry first (`docker login <registry>`; in the release "
                               "workflow the login step does it)") from None


def file_from_image(ref: str, path: str) -> bytes | None:
    """The bytes of `path` inside image `ref`, read from a created (never started) container; None
    when the image has no such file. Nothing in the image runs."""
    import tempfile
    import uuid

    docker = client()
    name = f"bundle-read-{uuid.uuid4().hex[:8]}"
    docker.container.create(ref, ["true"], name=name, networks=["none"])
    try:
        with tempfile.TemporaryDirectory(prefix="bundle-read-") as tmp:
            target = Path(tmp) / "file"
            try:
                docker.copy((name, path), target)
            except DockerException:
                return None
            return target.read_bytes() if target.is_file() else None
    finally:
        docker.container.remove(name, force=True)


# ---- images: `bundle build` ----

def buildx_available() -> bool:
    """Whether `docker buildx` (BuildKit through the CLI plugin) is installed."""
    try:
        return client().buildx.is_installed()
    except DockerException:
        return False


def _print_progress(line: str) -> None:
    print(line, flush=True)


def build_image(*, context: Path, dockerfile: Path, tags: list[str], build_args: dict[str, str],
                labels: dict[str, str], use_cache: bool = True, use_buildx: bool = True,
                on_line=None, progress=_print_progress) -> str:
    """Build one image and return its id; each log line goes to `on_line` as it comes, and the
    build's progress, condensed (bundle.stack.build_progress: `[step n/m] ... elapsed`), to
    `progress` (default: printed; None: silent). Every caller shows progress without asking for it.

    buildx (BuildKit) when present; else the legacy builder, which the Dockerfiles are written to
    work with too (no RUN --mount). A failed build raises a BundleError with the log's tail.
    """
    if use_buildx:
        def lines():
            for line in client().buildx.build(context, file=dockerfile, tags=tags, build_args=build_args,
                                              labels=labels, cache=use_cache, load=True, progress="plain",
                                              provenance=False, stream_logs=True):
                yield line
    else:
        # The Docker 23+ CLI defaults to BuildKit and refuses to build without buildx; this asks
        # for the legacy builder explicitly.
        def lines():
            yield from _cli_build_lines(context, dockerfile, tags, build_args, labels, use_cache, buildkit=False)
    return _run_build(lines, tags=tags, dockerfile=dockerfile, on_line=on_line, progress=progress)


def build_image_engine_buildkit(*, context: Path, dockerfile: Path, tags: list[str],
                                build_args: dict[str, str], labels: dict[str, str],
                                use_cache: bool = True, on_line=None, progress=_print_progress) -> str:
    """Build with the engine's own BuildKit (`DOCKER_BUILDKIT=1 docker build --progress plain`) and
    return the id; `on_line` and `progress` as in build_image.

    For Dockerfiles that need BuildKit (RUN --mount cache mounts) on engines without the buildx
    plugin, such as Docker 20.10 from Debian: that CLI talks to the daemon's built-in BuildKit.
    (Docker 23+ without buildx refuses this; use build_image(use_buildx=True) there.)
    """
    def lines():
        yield from _cli_build_lines(context, dockerfile, tags, build_args, labels, use_cache, buildkit=True)
    return _run_build(lines, tags=tags, dockerfile=dockerfile, on_line=on_line, progress=progress)


def _cli_build_lines(context, dockerfile, tags, build_args, labels, use_cache, *, buildkit: bool):
    """`docker build`'s output lines as they come (python-on-whales' legacy_build prints them or
    keeps them quiet; progress needs them one by one)."""
    from python_on_whales.utils import stream_stdout_and_stderr

    cmd = ["docker", "build", "--file", str(dockerfile)]
    for tag in tags:
        cmd += ["--tag", tag]
    for key, value in build_args.items():
        cmd += ["--build-arg", f"{key}={value}"]
    for key, value in labels.items():
        cmd += ["--label", f"{key}={value}"]
    if not use_cache:
        cmd.append("--no-cache")
    if buildkit:
        cmd.append("--progress=plain")
    cmd.append(str(context))
    if _debug():
        print("+ DOCKER_BUILDKIT=%d %s" % (int(buildkit), " ".join(cmd)), flush=True)
    for _source, chunk in stream_stdout_and_stderr(cmd, env={"DOCKER_BUILDKIT": "1" if buildkit else "0"}):
        for line in chunk.decode(errors="replace").splitlines():
            yield line


def _run_build(lines, *, tags: list[str], dockerfile: Path, on_line, progress) -> str:
    from bundle.stack.build_progress import BuildProgress

    tail: list[str] = []
    meter = BuildProgress(progress or (lambda _text: None), name=f"build {tags[0]}")
    try:
        with meter.beating():
            for line in lines():
                line = line.rstrip()
                tail.append(line)
                del tail[:-40]
                meter.feed(line)
                if on_line is not None:
                    on_line(line)
    except DockerException as exc:
        meter.finish(ok=False)
        shown = "\n".join(tail[-25:]) or (exc.stderr or exc.stdout or "").strip()
        raise BundleError(f"building {tags[0]} from {dockerfile} failed:\n{shown}",
                          exit_code=EXIT_FAILED,
                          hint="fix the step shown above; the layers below it are kept and reused") from None
    meter.finish()
    return client().image.inspect(tags[0]).id


def container_processes(name: str) -> list[str]:
    """The process names running in a container (`docker top NAME -eo comm`): names only, never
    arguments (a server's command line carries its API key)."""
    import subprocess

    try:
        out = subprocess.run(["docker", "top", name, "-eo", "comm"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [line.strip() for line in out.stdout.splitlines()[1:] if line.strip()]
