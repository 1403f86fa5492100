"""Which launched topology a verb acts on, found as `docker compose` would: from the launch records under
runs/ (or the named config's projects), the ones with containers, asking only when that is ambiguous. A
FindRequest in (the verb's topology and config, and the target registry it reads: the registry stands
above the services, so the verb hands it down), Candidates out; a Candidate renders again, and writes the
env file, for a project whose launch left no record of its render."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from bundle import modes
from bundle import topology as registry
from bundle.api import TargetLookup
from bundle.config.loader import find_config, load_config
from bundle.config.model import Deployment
from bundle.config.source import DEFAULTS_NAME
from bundle.errors import EnvironmentProblem, InputError, NotFound
from bundle.service.prepare import load
from bundle.service.running import Launched
from bundle.stack import docker, engine, runstate
from bundle.topology import Topology


@dataclass(frozen=True)
class FindRequest:
    targets: TargetLookup  # the target registry (bundle/targets/registry.py), as the verb imported it
    topology: str | None = None  # a registry name; None: any
    config: str | None = None  # -c FILE; None: $BUNDLE_CONFIG, ./bundle.yaml, else every launch recorded


@dataclass
class Candidate:
    """One project the verb could mean: its topology, its launch record and its containers now."""

    project: str
    topology: Topology
    record: runstate.LaunchRecord | None  # None: never launched through the driver here
    containers: tuple[str, ...]  # its containers now, running or stopped
    targets: TargetLookup
    named_dep: Deployment | None = None  # the config named on the command line, if any

    @property
    def up(self) -> bool:
        return bool(self.containers)

    @cached_property
    def dep(self) -> Deployment:
        """The config named on the command line, else the one the launch used."""
        if self.named_dep is not None:
            return self.named_dep
        config = self.record.config if self.record else DEFAULTS_NAME
        return load_config(None if config == DEFAULTS_NAME else config)

    @cached_property
    def launch(self) -> runstate.LaunchRecord:
        """The launch record; for a project started by plain compose, runs/ wiped, or a record of an
        older driver (no rendered variables), what the config would launch, rendered again."""
        if self.record is not None and self.record.env:
            return self.record
        from bundle.service.prepare import prepare

        mode = modes.from_record(self.record.mode if self.record else None)
        rendered = prepare(self.topology.name, dep=self.dep, mode=mode).rendered
        rendered.write()
        return runstate.LaunchRecord.of(rendered, mode=modes.record_value(mode), config=self.dep.source.name,
                                        run_dir=runstate.project_dir(self.project))

    def stack(self):
        return self.targets.stack_of(self.launch)

    def launched(self, *, config: bool = True) -> Launched:
        """What the running verbs' services take: its launch, stack and (unless `config` is False: a verb
        that needs none works where the launch's config file has gone) config only when it is up."""
        if not self.up:
            return Launched(self.project, self.topology, self.record, self.containers)
        return Launched(self.project, self.topology, self.launch, self.containers, self.stack(),
                        self.dep if config else None)


def candidates(request: FindRequest) -> list[Candidate]:
    """Every project the command could mean (a topology named or not, -c or not), those with containers
    first: the named config's topologies, or (no config named) every launch recorded under runs/ plus the
    embedded defaults'."""
    names = [request.topology] if request.topology else list(registry.NAMES)
    named = request.config is not None or find_config(None) is not None
    engine.require_engine()
    dep = load(request.config)
    records = {} if named else {r.project: r for r in runstate.all_records() if r.topology in names}
    for name in names:
        for project in request.targets.launched_projects(dep.project_name(name)):
            if project not in records:
                try:
                    records[project] = runstate.load(project)
                except InputError:
                    records[project] = None
    out = []
    for project, record in records.items():
        topology = registry.get(record.topology) if record else _topology_of(request, dep, project, names)
        containers = tuple(docker.project_containers(project))
        if record is None and not containers and project != dep.project_name(topology.name):
            continue  # another target's project of this topology, never launched here: not a candidate
        out.append(Candidate(project, topology, record, containers, request.targets,
                             named_dep=dep if named else None))
    return sorted(out, key=lambda t: (not t.up, t.project))


def only_running(found: list[Candidate], topology: str | None, *, verb: str) -> Candidate:
    """The one candidate with containers; a BundleError naming the choices otherwise."""
    up = [t for t in found if t.up]
    if not up:
        names = ", ".join(t.project for t in found[:4])
        raise NotFound(f"nothing to {verb}: {names or 'no project'} is not running",
                       hint=f"`bundle launch {topology or '|'.join(registry.NAMES)}` "
                            f"first ({modes.registry().HINT})")
    if len(up) > 1:
        listing = ", ".join(f"{t.project} ({t.topology.name})" for t in up)
        raise EnvironmentProblem(f"{len(up)} topologies are up ({listing}); name the one to {verb}",
                                 hint=f"e.g. `bundle {verb} {up[0].topology.name}`, with -c FILE where it was "
                                      "launched with one")
    return up[0]


def one_running(request: FindRequest, *, verb: str) -> Candidate:
    """The one launched topology with containers (see only_running)."""
    return only_running(candidates(request), request.topology, verb=verb)


def _topology_of(request: FindRequest, dep: Deployment, project: str, names: list[str]) -> Topology:
    return next(registry.get(n) for n in names
                if project in request.targets.launched_projects(dep.project_name(n)))
