"""The one path every command takes from bundle.yaml to a checked render: load -> render (once) ->
rules, with what a rehearsal adds to the env computed here and nowhere else."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bundle import topology as registry
from bundle.config.loader import find_config, load_config
from bundle.config.model import Deployment
from bundle.render.compose import Rendered, render
from bundle.rules.check import Findings, check
from bundle.topology import Topology


def load(config: str | None) -> Deployment:
    """The named config, else $BUNDLE_CONFIG or ./bundle.yaml, else the embedded defaults."""
    return load_config(find_config(config))


@dataclass(frozen=True)
class Prepared:
    dep: Deployment
    topology: Topology
    rendered: Rendered
    findings: Findings


def prepare(topology: str, *, config: str | None = None, dep: Deployment | None = None,
            rehearsal: bool | str | None = None, sim: Mapping[str, str] | None = None,
            extra_env: Mapping[str, str] | None = None, require_model: bool = False, collectives=None,
            monitoring: bool = False) -> Prepared:
    """Config -> render (once) -> rules; raises one ConfigError listing every problem, before anything runs.
    `dep`: a config already loaded (else `config`'s); `rehearsal`: None, "engine" or "sim", whose
    additions to the env (rehearsal_env, with the simulator's knobs `sim`) come first and `extra_env`
    over them; `collectives`: launch's per-host levers.Collectives decision (None: unprobed, see levers)."""
    from bundle.images.lock import load_lock

    dep = dep or load(config)
    entry = registry.get(topology)
    mode = registry.rehearsal_mode(rehearsal)
    env = {**rehearsal_env(mode, knobs=dict(sim or {})), **(extra_env or {})}
    lock = load_lock()
    rendered = render(dep, entry, image=lock.image_ref, lock_hash=lock.hash, rehearsal=mode or False,
                      extra_env=env, collectives=collectives, monitoring=monitoring)
    findings = check(dep, rendered, require_model=require_model)
    findings.raise_if_errors(dep.source.name)
    return Prepared(dep, entry, rendered, findings)


def rehearsal_env(mode: str | None, *, knobs: dict[str, str] | None = None) -> dict[str, str]:
    """What a rehearsal adds to the rendered env: the image's tag and the model folder (both known
    before anything is built, from hashes of their inputs), health waits, the simulator's knobs."""
    if mode is None:
        return {}
    from bundle.images import rehearsal as rehearsal_image

    tag = rehearsal_image.image_tag()
    if mode == registry.REHEARSAL_ENGINE:
        from bundle.images.rehearsal_model import model_dir
        from bundle.render import rehearsal_engine

        return rehearsal_engine.env_values(tag, model_dir(tag))
    from bundle.render import rehearsal

    return rehearsal.env_values(tag, knobs=knobs)


def ensure_rehearsal_artifacts(mode: str | None, report) -> None:
    """Build the rehearsal image if its inputs changed; train the engine's model if missing."""
    if mode is None:
        return
    from bundle.images import rehearsal as rehearsal_image

    tag = rehearsal_image.ensure_image(report=report)
    if mode == registry.REHEARSAL_ENGINE:
        from bundle.images.rehearsal_model import ensure_model

        ensure_model(tag, report=report)
