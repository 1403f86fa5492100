"""One pipeline from bundle.yaml to a render target's checked output, used by `bundle render --target`
and by the launches that submit what they render (a target wing's launcher): the compose render and its rules
(service.prepare), the target's own rules on the settings only it reads, its render, and its problems()
on what was rendered (schemas, parsers). render_target() writes nothing: the caller writes the output where
it goes (a folder, a container cluster's shared file system).

`bundle render` is two steps of this service, its warnings printed between them (before anything is
written): compose's render written and resolved by compose itself (resolve_compose), or a target's render
written into a folder and checked further (write_folder)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bundle import modes
from bundle.api import Renderer, Target, TargetRules
from bundle.config.model import Deployment
from bundle.errors import ConfigError, Failed, UsageError
from bundle.render.compose import Rendered
from bundle.service.prepare import Prepared, prepare
from bundle.api import Mode


@dataclass(frozen=True)
class RenderRequest:
    """`bundle render`: one topology for one target (an entry of bundle/targets/registry.py)."""

    topology: str  # a registry name
    target: Target
    config: str | None = None  # bundle.yaml's path; None: $BUNDLE_CONFIG, ./bundle.yaml or the defaults
    mode: Mode | None = None  # a way to run with no GPU, for a target that takes one
    output: str | None = None  # -o DIR: where a target that writes a folder writes it
    dry_run: bool = False  # also the target's outside check of the written folder (Target.dry_run)

    def refusals(self) -> None:
        """A usage error for what this target cannot do, before anything is rendered."""
        target = self.target
        if self.mode and not target.takes_mode:
            flag = modes.flag()
            raise UsageError(f"{flag} is a compose overlay; the {target.name} render has none",
                             hint=f"leave out {flag} with --target {target.name}")
        if self.dry_run and not target.dry_run:
            raise UsageError(f"--kubectl-dry-run runs an outside tool on written manifests; the {target.name} "
                             f"render offers no such check", hint="leave out --kubectl-dry-run, or render with a "
                                                                  "--target that offers it (`bundle render --help`)")
        if target.writes_folder and not self.output:
            raise UsageError(f"--target {target.name} needs -o DIR, the folder to write to",
                             hint=f"bundle render --target {target.name} {self.topology} "
                                  f"-o {target.name}/{self.topology}")


def render_compose(request: RenderRequest) -> Prepared:
    """The compose render and its rules (nothing written: resolve_compose() writes the env file)."""
    request.refusals()
    return prepare(request.topology, config=request.config, mode=request.mode)


def render_for(request: RenderRequest) -> TargetRender:
    """A folder target's output (nothing written: write_folder() writes it)."""
    request.refusals()
    return render_target(request.target.renderer, request.target.rules, request.topology, config=request.config,
                         mode=request.mode if request.target.takes_mode else None)


def write_requested(request: RenderRequest, made: TargetRender) -> FolderWritten:
    """write_folder() into the request's -o DIR, with the target's dry run when it asked for one."""
    return write_folder(made, request.output, dry_run=request.target.dry_run if request.dry_run else None)


@dataclass(frozen=True)
class TargetRender:
    prepared: Prepared  # the compose render it was made from, and its rules' findings
    output: object  # the target's render: write(folder), summary(), how_to_run(folder), warnings
    checked: str  # what problems() held the output to, one line
    target_warnings: tuple[str, ...] = ()  # the target's own rules' warnings (its settings only it reads)

    @property
    def warnings(self) -> tuple[str, ...]:
        return (*self.prepared.findings.warnings, *self.target_warnings, *self.output.warnings)


def render_target(renderer: Renderer, rules: TargetRules | None, topology: str, *, config: str | None = None,
                  dep: Deployment | None = None, mode: Mode | None = None,
                  sim: Mapping[str, str] | None = None) -> TargetRender:
    """A target's output from the compose render of `topology` (with a Mode: its variant with no GPU, for a
    renderer that takes one); raises one ConfigError listing every problem."""
    prepared = prepare(topology, config=config, dep=dep, mode=mode, sim=sim)
    dep = prepared.dep
    target_warnings: tuple[str, ...] = ()
    if rules is not None:
        found = rules.check(dep, prepared.topology)
        found.raise_if_errors(dep.source.name)
        target_warnings = tuple(found.warnings)
    output = (renderer.for_target(dep, prepared.rendered, mode=mode) if mode is not None
              else renderer.for_target(dep, prepared.rendered))
    problems = rules.problems(output) if rules is not None else []
    if problems:
        raise ConfigError([f"{line}; it was made from {dep.source.name}: check the value it came from, else "
                           f"report it as a bundle bug" for line in problems], source=dep.source.name)
    checked = f"checked: {rules.CHECKED}" if rules is not None else "not checked beyond the compose rules"
    return TargetRender(prepared, output, checked, target_warnings)


@dataclass(frozen=True)
class ComposeResolved:
    resolved: dict  # compose's own view of the project (`docker compose config`)
    env_file: Path
    command: str  # the `docker compose ...` that runs it


def resolve_compose(rendered: Rendered) -> ComposeResolved:
    """Write the env file and ask compose for its resolved configuration (the engine is not needed)."""
    # Imported here: the Docker client is slow to import, and a folder target's render never needs it.
    from bundle.stack import docker, engine

    rendered.write()
    engine.require_compose()
    return ComposeResolved(docker.stack_of(rendered).config(), rendered.env_file, rendered.compose_command())


@dataclass(frozen=True)
class FolderWritten:
    written: list[Path]
    checked: str  # what the output was held to, one line (kubectl's word too, when asked)


def write_folder(made: TargetRender, folder: str, *,
                 dry_run: Callable[[Path], tuple[bool | None, str]] | None = None) -> FolderWritten:
    """A target's render written into `folder` (as the user wrote it: messages name it so); with the
    target's `dry_run` (an outside tool's check of the folder), also that on it (a refusal is a
    Failed)."""
    written = made.output.write(Path(folder))
    checked = made.checked
    if dry_run is not None:
        ok, text = dry_run(Path(folder))
        if ok is False:
            raise Failed(f"kubectl apply --dry-run=client refused {folder}:\n{text}")
        checked += f"; kubectl: {text}"
    return FolderWritten(written, checked)
