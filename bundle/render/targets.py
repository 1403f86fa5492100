"""The render targets: what `bundle render --target NAME` can turn a topology into, one module each.

Every command renders compose once (render/compose.py: the config, the topology, every command line).
A target turns that render into what another engine runs, with the same command lines. Its module
(`module` below) offers

    for_target(dep: Deployment, rendered: compose.Rendered) -> output

pure, whose output has `warnings` (a tuple of lines); a target that `writes_folder` gives it
`write(folder) -> list[Path]`, `summary()` ("manifests for pd in namespace x") and `how_to_run(folder)`
(the command that starts it); compose's own output is its env file under runs/<project>, written by
`Rendered.write()`. Its rules module (`rules`, optional, under bundle/rules/) offers
`check(dep, topology) -> Findings`, run before the render (settings only this target reads),
`problems(output) -> list[str]`, run on what was rendered (schemas, parsers), and `CHECKED`, one line
saying what problems() holds the output to. The registry names the
modules, so render/ never imports the rules above it; `bundle render` imports them when asked.

Adding a target = its module + one line in TARGETS; `--target` takes its choices from here and the
test suite renders every topology (and one it registers itself) for every target listed. A target
that `bundle launch --target NAME` can bring up names its launch service (`launcher`): a module offering
`launch(request: service.launch.LaunchRequest, dep=None)`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from bundle.errors import EXIT_USAGE, BundleError


@dataclass(frozen=True)
class Target:
    name: str
    help: str  # one line for `bundle render --help`
    module: str  # its render module: for_target(dep, rendered)
    rules: str | None = None  # its rules module: check(dep, topology), problems(output)
    writes_folder: bool = True  # needs `-o DIR`; compose writes its env file under runs/ instead
    rehearsal: bool = False  # takes --rehearsal (its for_target then gets rehearsal=MODE)
    launcher: str | None = None  # the service `bundle launch --target NAME` runs: launch(request, dep=)

    def renderer(self) -> ModuleType:
        return importlib.import_module(self.module)

    def checker(self) -> ModuleType | None:
        return importlib.import_module(self.rules) if self.rules else None

    def launch_service(self) -> ModuleType:
        return importlib.import_module(self.launcher)


TARGETS: dict[str, Target] = {
    "compose": Target("compose", "the env file, and the configuration exactly as docker compose resolves it",
                      module="bundle.render.compose", writes_folder=False, rehearsal=True,
                      launcher="bundle.service.launch"),
    "k8s": Target("k8s", "LeaderWorkerSet + smg manifests, checked against the Kubernetes and LeaderWorkerSet "
                         "schemas (one file per object in -o DIR)",
                  module="bundle.render.k8s", rules="bundle.rules.k8s"),
    "slurm": Target("slurm", "one sbatch script, a srun step per role (enroot/pyxis; with --rehearsal, the "
                             "rehearsal cluster's native one), docs/slurm.md",
                    module="bundle.render.slurm", rules="bundle.rules.slurm", rehearsal=True,
                    launcher="bundle.service.slurm_launch"),
}
NAMES = tuple(TARGETS)
LAUNCHABLE = tuple(name for name, t in TARGETS.items() if t.launcher)
DEFAULT = "compose"


def get(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise BundleError(f"unknown render target {name!r}; known: {', '.join(TARGETS)}",
                          exit_code=EXIT_USAGE) from None
