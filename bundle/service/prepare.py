"""The one path every command takes from bundle.yaml to a checked render: load -> render (once) ->
rules, with what a run with no GPU (a Mode) adds to the env computed here and nowhere else. The render
reads the topology's part of the config once (config.model.Layout: its section, replicas, servers and
router) and hands that value on with its result, which the rules check."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bundle import topology as registry
from bundle.config.loader import find_config, load_config
from bundle.config.model import Deployment
from bundle.render.compose import Rendered, render
from bundle.rules.check import RulesReport, check
from bundle.api import Mode
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
            mode: Mode | None = None, sim: Mapping[str, str] | None = None,
            extra_env: Mapping[str, str] | None = None, require_model: bool = False, collectives=None,
            monitoring: bool = False) -> Prepared:
    """Config -> render (once) -> rules; raises one ConfigError listing every problem, before anything runs.
    `dep`: a config already loaded (else `config`'s); `mode`: a Mode (no GPU) or None, whose
    additions to the env (its env_values, with the simulator's knobs `sim`) come first and `extra_env`
    over them; `collectives`: launch's per-host levers.Collectives decision (None: unprobed, see levers)."""
    from bundle.lock import load_lock

    dep = dep or load(config)
    entry = registry.get(topology)
    env = {**(mode.env_values(sim) if mode else {}), **(extra_env or {})}
    lock = load_lock()
    rendered = render(dep, entry, image=lock.image_ref, lock_hash=lock.hash, mode=mode,
                      extra_env=env, collectives=collectives, monitoring=monitoring)
    findings = check(dep, rendered, require_model=require_model)
    findings.raise_if_errors(dep.source.name)
    return Prepared(dep, entry, rendered, findings)
