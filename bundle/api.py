"""The small typed interfaces the wings implement and the core asks for, on the floor just above the
values they are typed with (config, the compose render, the rules' report): the services, the wings and
the registry above all name them.

A render target (bundle/targets/: compose and each wing's folder) is one `Target`: its renderer, its rules, its
launcher and its view of what a launch left running. A way to run a topology with no GPU is one `Mode`
(bundle/modes.py: their registry, as the core sees it). Each registry holds one entry per wing; the verbs
and services ask the entry, never a name. Removing a wing is deleting its folder and its
registry lines (tests/test_wings.py does it for the targets).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from bundle.paths import compose_dir

if TYPE_CHECKING:  # types only (the import costs nothing at run time); the import graph counts them
    from bundle.config.model import Deployment
    from bundle.render.compose import Rendered
    from bundle.rules.check import RulesReport
    from bundle.stack.runstate import LaunchRecord
    from bundle.topology import Topology


class TargetOutput(Protocol):
    """What a renderer made of one topology. A target that writes a folder also offers write(folder) ->
    list[Path], summary() and how_to_run(folder)."""

    warnings: tuple[str, ...]


class Renderer(Protocol):
    """(typed config, the compose render) -> the target's output; pure. A renderer of a target that takes
    a Mode also takes `mode=` (the mode, or None)."""

    def for_target(self, dep: Deployment, rendered: Rendered, **options: Any) -> TargetOutput: ...


class TargetRules(Protocol):
    """check(): the settings only this target reads, before its render; problems(): what is wrong with
    what it rendered (schemas, parsers); CHECKED: one line saying what problems() holds it to."""

    CHECKED: str

    def check(self, dep: Deployment, topology: Topology) -> RulesReport: ...

    def problems(self, output: Any) -> list[str]: ...


class Launcher(Protocol):
    """The service `bundle launch --target NAME` runs: a LaunchRequest in, progress on the Reporter."""

    def launch(self, request: Any, dep: Deployment | None, reporter: Any) -> None: ...


class StackView(Protocol):
    """The verbs' view of what a launch left running (status, logs, smoke, bench, down)."""

    project: str

    def states(self) -> list: ...

    def logs(self, service: str | None = None, **options: Any) -> Any: ...

    def exec(self, service: str, command: list[str]) -> str: ...

    def down(self, *, volumes: bool = False, timeout: int | None = None) -> bool: ...


class TargetLookup(Protocol):
    """What the services that find a launched project ask of the target registry (bundle/targets/registry.py,
    which stands above them: the verb hands the module down)."""

    def launched_projects(self, base: str) -> dict[str, str]: ...

    def stack_of(self, record: LaunchRecord) -> StackView: ...


@dataclass(frozen=True)
class Target:
    name: str
    # One line for `bundle render --help`. It and launch_help may name the no-GPU modes' flag as {flag} and
    # their word as {word}: the verbs that offer the flag fill them in (str.format).
    help: str
    renderer: Renderer  # for_target(dep, rendered)
    stack: Callable[[LaunchRecord], StackView] | None = None  # what a launch of it left running
    rules: TargetRules | None = None  # check(dep, topology), problems(output)
    writes_folder: bool = True  # needs `-o DIR`; compose writes its env file under runs/ instead
    takes_mode: bool = False  # runs with no GPU in a Mode too (its for_target then gets mode=MODE)
    launcher: Launcher | None = None  # the service `bundle launch --target NAME` runs: launch(request, dep=)
    launch_help: str = ""  # a launcher's words for `bundle launch --help`: where it runs
    project: Callable[[str], str] = lambda base: base  # the compose project a launch of it runs as
    status: Callable[[str], dict | None] | None = None  # what `bundle status` adds for a launch of it
    # `--kubectl-dry-run`'s check of a written folder: (True, what it said), (False, its refusal) or
    # (None, why it could not run); None for a target whose output no outside tool checks.
    dry_run: Callable[[Path], tuple[bool | None, str]] | None = None
    dry_run_help: str = ""  # what `--kubectl-dry-run` does for it, for `bundle render --help`


@dataclass(frozen=True)
class Mode:
    """A way to run a topology with no GPU (bundle/modes.py: their registry). The compose render takes one
    as its bundle.topology.Overlay."""

    name: str
    summary: str  # what runs, a few words, for the line that says what a launch runs
    description: str  # one line for --help
    overlay: str  # its compose overlay under compose/, "{topology}" replaced by the topology's name
    env: Callable[[str, Mapping[str, str]], dict[str, str]]  # (its image's tag, --sim knobs) -> env
    image_tag: Callable[[], str]  # the tag of the image it runs in, from the hash of its inputs (builds nothing)
    ensure_image: Callable[..., str]  # (report=) that image built if its inputs changed; returns its tag
    server_args: Callable[[Topology, dict[str, str]], dict[str, str]] | None = None  # render's overrides
    ensure_model: Callable[..., Any] | None = None  # (image tag, report=) a model made here before it launches
    takes_knobs: bool = False  # the simulator's --sim KNOB=VALUE
    tunable: bool = True  # `bundle tune` may sweep with it (its speeds say something about the levers)
    # Its speed is bounded by the machine it runs on, so a bench scores it against that machine's limit (the
    # CPU engine); False where the speed is only the mode's own settings (the simulator).
    hardware_bound: bool = True
    # What a table, plot or report of its figures says they are (not a GPU's): "kind" (a run of it, in a
    # sentence), "tune", "table", "table short", "plot" (bundle.modes.note).
    notes: Mapping[str, str] = field(default_factory=dict)

    @property
    def needs_model(self) -> bool:
        return self.ensure_model is not None

    def env_values(self, knobs: Mapping[str, str] | None = None) -> dict[str, str]:
        """What it adds to the rendered env: its image's tag and model folder (both known before anything is
        built), health waits, the simulator's knobs."""
        return self.env(self.image_tag(), dict(knobs or {}))

    def ensure_artifacts(self, *, report) -> str:
        """Its image built if its inputs changed, and the model it needs made if missing; its image's tag."""
        tag = self.ensure_image(report=report)
        if self.ensure_model is not None:
            self.ensure_model(tag, report=report)
        return tag

    def overlay_file(self, topology: Topology) -> Path:
        return compose_dir() / self.overlay.format(topology=topology.name)
