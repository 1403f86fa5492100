"""One pipeline from bundle.yaml to a render target's checked output, used by `bundle render --target`
and by the launches that submit what they render (the Slurm launch): the compose render and its rules
(service.prepare), the target's own rules on the settings only it reads, its render, and its problems()
on what was rendered (schemas, parsers). Nothing is written: the caller writes the output where it
goes (a folder, the rehearsal cluster's shared file system)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

from bundle.config.model import Deployment
from bundle.errors import ConfigError
from bundle.service.prepare import Prepared, prepare
from bundle.service.rehearsal import Mode


@dataclass(frozen=True)
class TargetRender:
    prepared: Prepared  # the compose render it was made from, and its rules' findings
    output: object  # the target's render: write(folder), summary(), how_to_run(folder), warnings
    checked: str  # what problems() held the output to, one line

    @property
    def warnings(self) -> tuple[str, ...]:
        return (*self.prepared.findings.warnings, *self.output.warnings)


def render_target(renderer: ModuleType, rules: ModuleType | None, topology: str, *, config: str | None = None,
                  dep: Deployment | None = None, rehearsal: Mode | None = None,
                  sim: Mapping[str, str] | None = None) -> TargetRender:
    """A target's output from the compose render of `topology` (with a rehearsal mode: the rehearsal's
    variant, for a renderer that takes one); raises one ConfigError listing every problem."""
    prepared = prepare(topology, config=config, dep=dep, rehearsal=rehearsal, sim=sim)
    dep = prepared.dep
    if rules is not None:
        rules.check(dep, prepared.topology).raise_if_errors(dep.source.name)
    output = (renderer.for_target(dep, prepared.rendered, rehearsal=rehearsal) if rehearsal is not None
              else renderer.for_target(dep, prepared.rendered))
    problems = rules.problems(output) if rules is not None else []
    if problems:
        raise ConfigError([f"{line}; it was made from {dep.source.name}: check the value it came from, else "
                           f"report it as a bundle bug" for line in problems], source=dep.source.name)
    checked = f"checked: {rules.CHECKED}" if rules is not None else "not checked beyond the compose rules"
    return TargetRender(prepared, output, checked)
