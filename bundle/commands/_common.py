"""Arguments several verbs share: the config file, the topology, the rehearsal and its simulator knobs.
The one path from bundle.yaml to a checked render is a service (bundle/service/prepare.py)."""

from __future__ import annotations

import argparse

from bundle import topology as registry
from bundle.errors import UsageError
from bundle.rehearsal import registry as rehearsal


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
    add_rehearsal_argument(parser, help=f"{rehearsal_help}; bare: {rehearsal.BARE}, or the mode that takes "
                                        "--sim knobs when some are given")
    parser.add_argument("--sim", action="append", default=[], metavar="KNOB=VALUE", help=sim_help)


def add_rehearsal_argument(parser: argparse.ArgumentParser, *, help: str) -> None:
    """--rehearsal [MODE]: its choices are the registry's (rehearsal/registry.py)."""
    # Given alone, argparse stores the registry's BARE_FLAG: not a str, so argparse does not check it
    # against the choices, which are then the modes' names only (no placeholder offered as a mode).
    parser.add_argument("--rehearsal", nargs="?", const=rehearsal.BARE_FLAG, default=None,
                        choices=rehearsal.NAMES, metavar="|".join(rehearsal.NAMES),
                        help=help)


def resolve_rehearsal(args: argparse.Namespace, *, tuning: bool = False) -> rehearsal.Mode | None:
    """args.rehearsal parsed once into a mode (or None), written back into args."""
    if not isinstance(args.rehearsal, rehearsal.Mode):
        args.rehearsal = rehearsal.parse(args.rehearsal, knobs=bool(getattr(args, "sim", None)), tuning=tuning)
    return args.rehearsal


def sim_knobs(args: argparse.Namespace) -> dict[str, str]:
    """The --sim pairs as a dict, refused (a usage error) without a rehearsal mode that takes them or
    when not SIM_NAME=VALUE."""
    mode = resolve_rehearsal(args)
    if args.sim and not mode:
        raise UsageError("--sim sets worker simulator knobs and needs --rehearsal")
    if args.sim and not mode.takes_knobs:
        takes = [m.name for m in rehearsal.MODES.values() if m.takes_knobs]
        raise UsageError(f"--sim sets worker simulator knobs: the {mode.name} rehearsal has none",
                         hint=f"use --rehearsal {' or '.join(takes)} with --sim knobs")
    knobs = {}
    for pair in args.sim:
        name, sep, value = pair.partition("=")
        if not sep or not name.startswith("SIM_"):
            raise UsageError(f"--sim {pair!r}: expected SIM_NAME=VALUE, e.g. SIM_TPOT_MS=20")
        knobs[name] = value
    return knobs


def find_request(args: argparse.Namespace):
    """The request that finds the launched project a running verb acts on (bundle/service/finding.py): its
    topology and -c, and the target registry, which stands above the services. Imported here: a verb that
    finds nothing (validate) does not pay for the registry's imports."""
    from bundle.service.finding import FindRequest
    from bundle.targets import registry as targets

    return FindRequest(targets, args.topology, args.config)
