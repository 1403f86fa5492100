"""The render targets: what `bundle render --target NAME` turns a topology into, and what `bundle
launch --target NAME` brings up. One entry each (a bundle.api.Target), each wing's own: the registry
stands above the wings and imports each plainly (no member is hidden behind a string), below the verbs
and `bundle tune` that ask it.

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
  Reporter the verb passes in (bundle/reporter.py);
- `stack(record)`: the verbs' view of what a launch of it left running (status, logs, smoke, bench,
  down), from its launch record; `project(base)`: the compose project a launch of it runs as (the
  deployment's own, or one of its own beside it, so two targets of one topology never collide);
  `status(project)`: what `bundle status` adds for it (None: nothing).

Adding a target = its folder under bundle/targets/ + one line in TARGETS; removing one = deleting
both (tests/test_wings.py proves it for Kubernetes and Slurm); `--target` takes its choices from here and the
test suite renders every topology (and one it registers itself) for every target listed.
"""

from __future__ import annotations

from bundle.api import StackView, Target
from bundle.errors import UsageError
from bundle.stack.runstate import LaunchRecord
from bundle.targets import compose
from bundle.targets.k8s import target as k8s
from bundle.targets.slurm import target as slurm

TARGETS: dict[str, Target] = {t.name: t for t in (
    compose.TARGET,
    k8s.TARGET,
    slurm.TARGET,
)}
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


def stack_of(record: LaunchRecord) -> StackView:
    """The stack a launch record describes, as its target brings it up."""
    return get(record.target).stack(record)
