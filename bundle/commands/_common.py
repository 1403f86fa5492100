"""Arguments and steps several verbs share: the config file, the topology, and the one path every
command takes from bundle.yaml to a checked render (load -> render -> rules)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bundle import topology as registry
from bundle.config.loader import find_config, load_config
from bundle.config.model import Deployment
from bundle.errors import BundleError
from bundle.render.compose import Rendered, render
from bundle.rules.check import Findings, check
from bundle.topology import Topology


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", metavar="FILE",
                        help="bundle.yaml to use (default: $BUNDLE_CONFIG, ./bundle.yaml, else the "
                             "embedded defaults for DeepSeek-V4-Flash on 8x RTX PRO 6000)")


def add_topology_argument(parser: argparse.ArgumentParser, *, optional: bool = False,
                          default_help: str = "every topology") -> None:
    names = " | ".join(registry.NAMES)
    if optional:
        parser.add_argument("topology", nargs="?", choices=registry.NAMES,
                            help=f"{names} (default: {default_help})")
    else:
        parser.add_argument("topology", choices=registry.NAMES, help=names)


def add_rehearsal_arguments(parser: argparse.ArgumentParser, *, rehearsal_help: str, sim_help: str) -> None:
    """--rehearsal and its repeatable --sim KNOB=VALUE (read back with sim_knobs)."""
    parser.add_argument("--rehearsal", nargs="?", const=BARE_REHEARSAL, default=None,
                        choices=[*registry.REHEARSAL_MODES, BARE_REHEARSAL], metavar="engine|sim",
                        help=f"{rehearsal_help}; bare: the real SGLang server on CPU (engine), or the "
                             "simulator when --sim knobs are given")
    parser.add_argument("--sim", action="append", default=[], metavar="KNOB=VALUE", help=sim_help)


# `--rehearsal` given bare: the engine, unless simulator knobs (--sim) ask for the simulator.
BARE_REHEARSAL = "default"


def resolve_rehearsal(args: argparse.Namespace, *, default: str = registry.REHEARSAL_ENGINE) -> str | None:
    """args.rehearsal as None, "engine" or "sim" (written back into args)."""
    value = args.rehearsal
    if value == BARE_REHEARSAL:
        value = registry.REHEARSAL_SIM if getattr(args, "sim", None) else default
    args.rehearsal = registry.rehearsal_mode(value)
    return args.rehearsal


def sim_knobs(args: argparse.Namespace) -> dict[str, str]:
    """The --sim pairs as a dict, refused (exit 2) without --rehearsal sim or when not SIM_NAME=VALUE."""
    resolve_rehearsal(args)
    if args.sim and not args.rehearsal:
        raise BundleError("--sim sets worker simulator knobs and needs --rehearsal", exit_code=2)
    if args.sim and args.rehearsal != registry.REHEARSAL_SIM:
        raise BundleError("--sim sets worker simulator knobs: the CPU engine rehearsal has none", exit_code=2,
                          hint="use --rehearsal sim with --sim knobs")
    knobs = {}
    for pair in args.sim:
        name, sep, value = pair.partition("=")
        if not sep or not name.startswith("SIM_"):
            raise BundleError(f"--sim {pair!r}: expected SIM_NAME=VALUE, e.g. SIM_TPOT_MS=20", exit_code=2)
        knobs[name] = value
    return knobs


def load(args: argparse.Namespace) -> Deployment:
    return load_config(find_config(getattr(args, "config", None)))


@dataclass(frozen=True)
class Prepared:
    dep: Deployment
    topology: Topology
    rendered: Rendered
    findings: Findings


def prepare(args: argparse.Namespace, topology: str, *, require_model: bool = False, rehearsal: bool = False,
            extra_env: dict[str, str] | None = None, dep: Deployment | None = None,
            collectives=None, monitoring: bool = False) -> Prepared:
    """Config -> render (once) -> rules; raises one ConfigError listing every problem, before anything runs.
    `collectives`: launch's per-host levers.Collectives decision (None: unprobed, see levers)."""
    from bundle.images.lock import load_lock

    dep = dep or load(args)
    entry = registry.get(topology)
    lock = load_lock()
    rendered = render(dep, entry, image=lock.image_ref, lock_hash=lock.hash, rehearsal=rehearsal,
                      extra_env=extra_env, collectives=collectives, monitoring=monitoring)
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
