"""The render targets: what `bundle render --target NAME` turns a topology into, and what `bundle
launch --target NAME` brings up. One entry each, on the service floor, so the registry imports every
member plainly (render below, the rules, the launch services beside it): no member is hidden behind a
string.

Every command renders compose once (render/compose.py: the config, the topology, every command line).
A target turns that render into what another engine runs, with the same command lines. Its entry holds

- `renderer`: a module offering `for_target(dep, rendered) -> output`, pure, whose output has
  `warnings` (a tuple of lines); a target that `writes_folder` gives it `write(folder) -> list[Path]`,
  `summary()` ("manifests for pd in namespace x") and `how_to_run(folder)` (the command that starts
  it); compose's own output is its env file under runs/<project>, written by `Rendered.write()`;
- `rules` (optional): a module offering `check(dep, topology) -> RulesReport`, run before the render
  (settings only this target reads), `problems(output) -> list[str]`, run on what was rendered
  (schemas, parsers), and `CHECKED`, one line saying what problems() holds the output to;
- `launcher` (optional): the service `bundle launch --target NAME` runs, a module offering
  `launch(request: service.launch.LaunchRequest, dep=None, reporter)`, its progress on the
  Reporter the verb passes in (verify/console.py);
- `stack(record)`: the verbs' view of what a launch of it left running (status, logs, smoke, bench,
  down), from its launch record; `project(base)`: the compose project a launch of it runs as (the
  deployment's own, or one of its own beside it, so two targets of one topology never collide);
  `status(project)`: what `bundle status` adds for it (None: nothing).

Adding a target = its modules + one entry in TARGETS; `--target` takes its choices from here and the
test suite renders every topology (and one it registers itself) for every target listed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from bundle.errors import UsageError
from bundle.render import compose, k8s, slurm as slurm_render
from bundle.rules import k8s as k8s_rules, slurm as slurm_rules
from bundle.service import launch as compose_launch, slurm_launch
from bundle.slurm.cluster import project_for as slurm_project
from bundle.slurm.stack import SlurmRehearsalStack, job_summary
from bundle.stack import docker
from bundle.stack.runstate import LaunchRecord


def _compose_stack(record: LaunchRecord) -> docker.Stack:
    return docker.Stack(record.project, [Path(f) for f in record.compose_files], Path(record.env_file),
                        profiles=list(record.profiles))


def _slurm_stack(record: LaunchRecord) -> docker.Stack:
    return SlurmRehearsalStack(record.project)


@dataclass(frozen=True)
class Target:
    name: str
    help: str  # one line for `bundle render --help`
    renderer: ModuleType  # for_target(dep, rendered)
    stack: Callable[[LaunchRecord], docker.Stack] | None = None  # what a launch of it left running
    rules: ModuleType | None = None  # check(dep, topology), problems(output)
    writes_folder: bool = True  # needs `-o DIR`; compose writes its env file under runs/ instead
    rehearsal: bool = False  # takes --rehearsal (its for_target then gets rehearsal=MODE)
    launcher: ModuleType | None = None  # the service `bundle launch --target NAME` runs: launch(request, dep=)
    project: Callable[[str], str] = lambda base: base  # the compose project a launch of it runs as
    status: Callable[[str], dict | None] | None = None  # what `bundle status` adds for a launch of it


TARGETS: dict[str, Target] = {
    "compose": Target("compose", "the env file, and the configuration exactly as docker compose resolves it",
                      renderer=compose, stack=_compose_stack, writes_folder=False, rehearsal=True,
                      launcher=compose_launch),
    "k8s": Target("k8s", "one DisaggregatedSet (pd) or LeaderWorkerSets + smg manifests, checked against the Kubernetes and LeaderWorkerSet "
                         "schemas (one file per object in -o DIR)",
                  renderer=k8s, rules=k8s_rules),
    "slurm": Target("slurm", "one sbatch script, a srun step per role (enroot/pyxis; with --rehearsal, the "
                             "rehearsal cluster's native one), docs/slurm.md",
                    renderer=slurm_render, stack=_slurm_stack, rules=slurm_rules, rehearsal=True,
                    launcher=slurm_launch, project=slurm_project, status=job_summary),
}
NAMES = tuple(TARGETS)
LAUNCHABLE = tuple(name for name, t in TARGETS.items() if t.launcher)
DEFAULT = "compose"


def get(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise UsageError(f"unknown render target {name!r}; known: {', '.join(TARGETS)}") from None


def launched_projects(base: str) -> dict[str, str]:
    """Every compose project a launch of the deployment project `base` can run as -> its target."""
    return {t.project(base): name for name, t in TARGETS.items() if t.launcher}


def stack_of(record: LaunchRecord) -> docker.Stack:
    """The stack a launch record describes, as its target brings it up."""
    return get(record.target).stack(record)
