"""Arguments several verbs share: the config file, the topology, the rehearsal and its simulator knobs.
The one path from bundle.yaml to a checked render is a service (bundle/service/prepare.py)."""

from __future__ import annotations

import argparse

from bundle import topology as registry
from bundle.config.model import Deployment
from bundle.errors import BundleError
from bundle.service.prepare import load as service_load


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
    return service_load(getattr(args, "config", None))
