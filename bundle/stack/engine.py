"""The engine and images side of the Docker boundary (python-on-whales): the one client, engine facts,
images (inspect, pull, tag, push, build), and throw-away containers (probes, the audit, tools) run by
one runner with a kill timer. The compose project side is bundle/stack/docker.py.

Everything here gives plain Python values or a `BundleError` back: no python-on-whales type and no
DockerException leaks out (docker_errors() is the one place that turns one into the other).
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from python_on_whales import DockerClient
from python_on_whales.client_config import ClientNotFoundError, ParsingError
from python_on_whales.exceptions import DockerException

from bundle import log_lines
from bundle.errors import BundleError, DockerFailed, EngineUnreachable, EnvironmentProblem, Failed, NotFound
from bundle.run import Finished


def _debug() -> bool:
    return os.environ.get("BUNDLE_DEBUG") == "1"


def client(**compose_settings) -> DockerClient:
    return DockerClient(debug=_debug(), **compose_settings)


def require_engine() -> None:
    """Raise a BundleError naming the fix when no Docker engine answers."""
    if shutil.which("docker") is None:
        raise EngineUnreachable("the `docker` command is not installed",
                                hint="install Docker Engine (https://docs.docker.com/engine/install/)")
    with docker_errors("no Docker engine answers", kind=EngineUnreachable,
                       hint="start the daemon (`systemctl start docker`) or set DOCKER_HOST"):
        client().system.info()


def require_compose() -> None:
    with docker_errors("cannot ask docker for its compose plugin"):
        installed = client().compose.is_installed()
    if not installed:
        raise EngineUnreachable("the Docker Compose v2 plugin (`docker compose`) is not installed",
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


def first_line(text: str | None) -> str:
    lines = [line for line in log_lines.lines(text or "") if line.strip()]
    return lines[0].strip() if lines else "(no output)"


@contextmanager
def docker_errors(what: str, *, hint: str | None = None, detail: str = "first line",
                  kind: type[BundleError] = DockerFailed) -> Iterator[None]:
    """The error funnel: any exception of the Docker client (python-on-whales) inside becomes one
    error of `kind` "<what>: <docker's words> (docker exit code N)" (the first line of its stderr, or with
    detail="all" the whole stderr/stdout)."""
    try:
        yield
    except DockerException as exc:
        words = (" " + first_line(exc.stderr) if detail == "first line"
                 else "\n" + ((exc.stderr or exc.stdout or "").strip() or "(no output)"))
        code = f" (docker exit code {exc.return_code})" if exc.return_code else ""
        raise kind(f"{what}:{words}{code}", hint=hint) from None
    except (ClientNotFoundError, ParsingError) as exc:  # no docker binary; an answer it cannot parse
        raise kind(f"{what}: {type(exc).__name__}: {first_line(str(exc))}", hint=hint) from None




def image_exists(ref: str) -> bool:
    with docker_errors(f"cannot look for image {ref}"):
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
    with docker_errors("docker info failed"):
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


# ---- throw-away containers: probes, the audit, tools ----

@dataclass(frozen=True)
class Throwaway:
    exit_code: int  # 0, or the container's (or docker's) non-zero exit
    output: str  # stdout, and on a failure stdout + stderr
    killed: bool  # killed at its time limit


def run_throwaway(image: str, command: list[str], *, purpose: str, timeout: float, env: dict[str, str],
                  volumes: list[tuple[Path | str, str, str]] = (), **options) -> Throwaway:
    """`command` once in a container of `image` named bundle-<purpose>-<random>, removed afterwards
    and killed after `timeout` s; its first word is the entrypoint. `options` go to `docker run`
    (networks, user, gpus, ipc, ulimit). A non-zero exit is returned, not raised: the caller says
    what it means."""
    name = f"bundle-{purpose}-{uuid.uuid4().hex[:8]}"
    docker = client()
    fired = threading.Event()

    def kill():
        fired.set()
        kill_quietly(docker, name)

    killer = threading.Timer(timeout, kill)
    killer.start()
    try:
        out = docker.run(image, command[1:], entrypoint=command[0], name=name, remove=True, envs=env,
                         volumes=[(str(src), target, mode) for src, target, mode in volumes], **options)
        return Throwaway(0, out or "", killed=False)
    except DockerException as exc:
        return Throwaway(exc.return_code or 1, f"{exc.stdout or ''}\n{exc.stderr or ''}",
                         killed=fired.is_set() and exc.return_code in (137, 143))
    finally:
        killer.cancel()


def kill_quietly(docker: DockerClient, name: str) -> None:
    try:
        docker.container.kill(name)
    except DockerException:
        pass


def run_probe_container(image: str, command: list[str], *, probe_file: Path, probe_target: str,
                        env: dict[str, str], gpus: bool, timeout: float) -> str:
    """Run `command` once in `image` with one host file mounted read-only; return stdout+stderr.

    The container gets what compose gives the workers (host IPC, unlimited memlock) so a probe sees
    the transports a worker would. A non-zero exit is not an error here: the output says why.
    """
    run = run_throwaway(image, command, purpose="probe", timeout=timeout, env=env,
                        volumes=[(probe_file, probe_target, "ro")], gpus="all" if gpus else None, ipc="host",
                        ulimit=["memlock=-1"])
    return run.output if run.exit_code == 0 else f"{run.output}\n(docker run exited {run.exit_code})"


@dataclass(frozen=True)
class AuditRun:
    returncode: int | None  # None: killed at the time limit
    output: str  # stdout + stderr (the probe's facts go to a mounted file, not here)


def run_audit_container(image: str, command: list[str], *, volumes: list[tuple[Path, str, str]],
                        env: dict[str, str], timeout: float, user: str | None = None) -> AuditRun:
    """Run `command` once in a throw-away container of `image` with no network (the audit must not
    reach anything, and proves imports work offline), the given host folders mounted, and killed
    after `timeout` s. A non-zero exit is returned, not raised: the caller says what it means."""
    require_engine()
    if not image_exists(image):
        raise NotFound(f"image {image} is not here",
                       hint="build it (`bundle build`, or `bundle build --standin` without a GPU) "
                            "or pull it (`bundle pull`), or name another with --image REF")
    run = run_throwaway(image, command, purpose="audit", timeout=timeout, env=env, volumes=volumes,
                        networks=["none"], user=user)
    return AuditRun(None if run.killed else run.exit_code, run.output)


def run_networked_tool(image: str, command: list[str], *, env: dict[str, str],
                       volumes: list[tuple[Path, str, str]], timeout: float) -> str:
    """Run `command` once in a throw-away container of `image` on the default network (for tools
    that reach outside: `bundle model pin/fetch` and the Hugging Face Hub); stdout + stderr, a
    non-zero exit included (the caller reads the output for its marker line)."""
    require_engine()
    run = run_throwaway(image, command, purpose="tool", timeout=timeout, env=env, volumes=volumes, user="0")
    return run.output if run.exit_code == 0 else f"{run.output}\n(exit {run.exit_code})"


@dataclass(frozen=True)
class ContainerImage:
    container: str
    running: bool
    image_id: str
    image_ref: str  # what the container was created from (Config.Image)
    labels: dict[str, str]  # the container's labels (an image's labels are copied onto it)


def container_image(name: str) -> ContainerImage:
    with docker_errors(f"cannot inspect container {name}"):
        c = client().container.inspect(name)
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
    with docker_errors(f"cannot inspect image {ref}"):
        if not docker.image.exists(ref):
            return None
        image = docker.image.inspect(ref)
    return ImageFacts(id=image.id, repo_digests=tuple(image.repo_digests or ()),
                      labels=dict(image.config.labels or {}))


def pull_image(ref: str) -> None:
    with docker_errors(f"docker pull {ref} failed", detail="all",
                       hint="check the registry is reachable and you are logged in (`docker login <registry>`)"):
        client().image.pull(ref, quiet=True)


def tag_image(source: str, target: str) -> None:
    with docker_errors(f"cannot tag {source} as {target}"):
        client().image.tag(source, target)


def remove_image_ref(ref: str) -> None:
    """Remove one reference (tag or digest); the image's data goes only when nothing else names it."""
    with docker_errors(f"could not remove image {ref}", hint=f"remove it by hand: docker image rm {ref}"):
        client().image.remove(ref, force=False, prune=True)


def push_image(ref: str) -> None:
    """`docker push ref`; the engine then records `<repo>@<digest>` among the image's RepoDigests."""
    with docker_errors(f"docker push {ref} failed", detail="all",
                       hint="log in to the registry first (`docker login <registry>`; in the release "
                            "workflow the login step does it)"):
        client().image.push(ref, quiet=True)


def file_from_image(ref: str, path: str) -> bytes | None:
    """The bytes of `path` inside image `ref`, read from a created (never started) container; None
    when the image has no such file. Nothing in the image runs."""
    import tempfile

    docker = client()
    name = f"bundle-read-{uuid.uuid4().hex[:8]}"
    with docker_errors(f"cannot read {path} from image {ref}"):
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
        _remove_quietly(docker, name)


def folder_to_image(folder: Path, ref: str, *, label: str) -> None:
    """`folder`'s files as the one layer of image `ref`, under /data (`docker import` of a tar of it:
    nothing is built or run, so no layer below it is walked). `label` is the image's commit message."""
    import tarfile
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bundle-import-") as tmp:
        archive = Path(tmp) / "folder.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(folder, arcname="data")
        with docker_errors(f"cannot keep {folder} in the engine as {ref}"):
            client().image.import_(archive, tag=ref, message=label, changes=["CMD [\"none\"]"])


def folder_from_image(ref: str, target: Path) -> None:
    """The /data folder of an image made by folder_to_image(), copied to `target` (which must not
    exist) from a created, never started, container."""
    docker = client()
    name = f"bundle-read-{uuid.uuid4().hex[:8]}"
    with docker_errors(f"cannot read the folder kept in {ref}"):
        docker.container.create(ref, name=name, networks=["none"])
        try:
            docker.copy((name, "/data"), target)
        finally:
            _remove_quietly(docker, name)


def _remove_quietly(docker: DockerClient, name: str) -> None:
    try:
        docker.container.remove(name, force=True)
    except DockerException:
        pass


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
    splitters: dict[str, log_lines.LineSplitter] = {}
    for source, chunk in stream_stdout_and_stderr(cmd, env={"DOCKER_BUILDKIT": "1" if buildkit else "0"}):
        yield from splitters.setdefault(source, log_lines.LineSplitter()).feed(chunk)
    for splitter in splitters.values():
        yield from splitter.flush()


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
        raise Failed(f"building {tags[0]} from {dockerfile} failed:\n{shown}",
                     hint="fix the step shown above; the layers below it are kept and reused") from None
    meter.finish()
    with docker_errors(f"built {tags[0]}, but cannot inspect it"):
        return client().image.inspect(tags[0]).id


def container_processes(name: str) -> list[str]:
    """The process names running in a container (`docker top NAME -eo comm`): names only, never
    arguments (a server's command line carries its API key). [] when it cannot be asked."""
    from python_on_whales.utils import run

    # python-on-whales has no `top` (its ContainerCLI.top raises NotImplementedError): its own runner,
    # with this client's docker command, so an error is still a DockerException.
    try:
        out = run([*client().client_config.docker_cmd, "top", name, "-eo", "comm"])
    except (DockerException, OSError):
        return []
    return [line.strip() for line in log_lines.lines(out)[1:] if line.strip()]


def run_streamed(image: str, command: list[str], *, name: str, volumes: list[tuple[Path | str, str, str]],
                 on_line, network: str = "none") -> tuple[int, list[str]]:
    """`command` once in a container of `image` named `name` (its first word the entrypoint), each
    output line given to `on_line` as it comes (minutes of work show progress), removed afterwards,
    also when interrupted. Returns the exit code and the last 20 lines."""
    docker = client()
    with docker_errors(f"cannot start {name} from {image}"):
        docker.run(image, command[1:], entrypoint=command[0], name=name, detach=True, networks=[network],
                   volumes=[(str(src), target, mode) for src, target, mode in volumes])
    tail: list[str] = []
    try:
        with docker_errors(f"lost {name}'s output"):
            splitters: dict[str, log_lines.LineSplitter] = {}
            for source, chunk in docker.container.logs(name, follow=True, stream=True):
                for line in splitters.setdefault(source, log_lines.LineSplitter()).feed(chunk):
                    tail = (tail + [line.rstrip()])[-20:]
                    on_line(line.rstrip())
            for line in (rest for splitter in splitters.values() for rest in splitter.flush()):
                tail = (tail + [line.rstrip()])[-20:]
                on_line(line.rstrip())
            code = docker.container.wait(name)
    finally:
        _remove_quietly(docker, name)
    return code, tail


def exec_with_input(container: str, argv: list[str], *, stdin: str | None, workdir: str | None,
                    timeout: float) -> Finished:
    """`docker exec -i [-w WORKDIR] CONTAINER ARGV` with `stdin` fed to it, whatever its exit status.
    python-on-whales' execute cannot feed stdin (sbatch reads its script from there), so this runs the
    client's own docker command through the funnel for outside commands (bundle/run.py), with a time
    limit; a missing docker is EngineUnreachable, a hang an EnvironmentProblem."""
    from bundle.errors import CommandMissing, CommandTimedOut
    from bundle.run import run

    cmd = [*client().client_config.docker_cmd, "exec", "-i", *(["-w", workdir] if workdir else []), container,
           *argv]
    try:
        return run(cmd, input=stdin, timeout=timeout, check=False)
    except CommandMissing:
        raise EngineUnreachable("docker: not found",
                                hint="install the Docker CLI (docker.com/engine/install)") from None
    except CommandTimedOut as exc:
        raise EnvironmentProblem(f"{' '.join(argv)} in {container} gave no answer within {timeout:.0f} s") from exc
