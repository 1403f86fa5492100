"""The one path every command takes from bundle.yaml to a checked render: load -> render (once) ->
rules, with what a rehearsal adds to the env computed here and nowhere else."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bundle import topology as registry
from bundle.config.loader import find_config, load_config
from bundle.config.model import Deployment
from bundle.render.compose import Rendered, render
from bundle.rules.check import RulesReport, check
from bundle.api import Mode
from bundle.rehearsal import registry as modes
from bundle.topology import Topology


def load(config: str | None) -> Deployment:
    """The named config, else $BUNDLE_CONFIG or ./bundle.yaml, else the embedded defaults."""
    return load_config(find_config(config))


@dataclass(frozen=True)
class Prepared:
    dep: Deployment
    topology: Topology
    rendered: Rendered
    findings: RulesReport


def prepare(topology: str, *, config: str | None = None, dep: Deployment | None = None,
            rehearsal: Mode | None = None, sim: Mapping[str, str] | None = None,
            extra_env: Mapping[str, str] | None = None, require_model: bool = False, collectives=None,
            monitoring: bool = False) -> Prepared:
    """Config -> render (once) -> rules; raises one ConfigError listing every problem, before anything runs.
    `dep`: a config already loaded (else `config`'s); `rehearsal`: a rehearsal mode or None, whose
    additions to the env (the registry's env_values, with the simulator's knobs `sim`) come first and `extra_env`
    over them; `collectives`: launch's per-host levers.Collectives decision (None: unprobed, see levers)."""
    from bundle.lock import load_lock

    dep = dep or load(config)
    entry = registry.get(topology)
    env = {**(modes.env_values(rehearsal, sim) if rehearsal else {}), **(extra_env or {})}
    lock = load_lock()
    rendered = render(dep, entry, image=lock.image_ref, lock_hash=lock.hash, rehearsal=rehearsal,
                      extra_env=env, collectives=collectives, monitoring=monitoring)
    findings = check(dep, rendered, require_model=require_model)
    findings.raise_if_errors(dep.source.name)
    return Prepared(dep, entry, rendered, findings)
