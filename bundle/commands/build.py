"""`bundle build`: build the layered images from docker/lock.toml, reusing unchanged layers. The work is
the build service's (bundle/service/build.py); this file parses and prints."""

from __future__ import annotations

import argparse

from bundle import modes
from rich.console import Console

HELP = "build the layered images pinned by docker/lock.toml (--dry-run prints the plan)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bundle.service.build import LAYER_NAMES

    parser.add_argument("--dry-run", action="store_true",
                        help="print the layers, tags and build arguments; build nothing")
    parser.add_argument("--layer", nargs="+", metavar="NAME", choices=None, default=None,
                        help=f"build only these layers (rebuilt even if tagged), one of: "
                             f"{', '.join(LAYER_NAMES)}")
    parser.add_argument("--no-cache", action="store_true", help="rebuild every step, reuse nothing")
    parser.add_argument("--standin", action="store_true",
                        help="a local build, never pushed: the same layers named <repo>-standin without the "
                             f"registry (CI, the {modes.word()}'s parent)")
    parser.add_argument("--kernels", nargs="+", metavar="NAME", default=None,
                        help="compile only these FlashInfer modules in the kernels layer (default: every module "
                             "the predicted choices may load, with --standin too)")
    parser.add_argument("--no-sbom", action="store_true",
                        help="build the runtime layer without the CycloneDX SBOM (and its label)")
    parser.add_argument("--lock", default=None, help="path of the lock (default docker/lock.toml)")


def run(args: argparse.Namespace) -> int:
    from bundle.service import build as service

    console = Console(highlight=False)
    request = service.BuildRequest(lock=args.lock, layers=tuple(args.layer) if args.layer else None,
                                   use_cache=not args.no_cache, standin=args.standin,
                                   kernels=tuple(args.kernels) if args.kernels is not None else None,
                                   with_sbom=not args.no_sbom)
    if args.dry_run:
        _print_plan(console, service.plan(request))
        return 0
    built = service.build(request, console)
    console.print(f"done: {built.built} built, {built.reused} reused; image {built.image} (lock {built.lock_hash})",
                  markup=False)
    return 0


def _print_plan(console: Console, planned) -> None:
    """Plain lines, not a table: the plan is read in CI logs and terminals of any width."""
    plan, layers, states = planned.plan, planned.layers, planned.states
    lock = plan.lock
    out = [f"lock {lock.path}  hash {lock.hash}  image {plan.layers[-1].extra_tags[0]}"
           + ("  (local build, never pushed: named without the registry)" if plan.standin else "")]
    for i, lp in enumerate(layers, 1):
        out.append(f"[{i}/{len(layers)}] {lp.name:<9} {lp.tag}  {states.get(lp.name, '')}")
        for extra in lp.extra_tags:
            out.append(f"    also tagged {extra}")
        out.append(f"    holds: {lp.spec.holds}")
        for key, value in lp.build_args.items():
            out.append(f"    --build-arg {key}={value}")
    out.append("pins: " + ", ".join(f"{k} {v}" for k, v in lock.pins.items() if k != "base_image"))
    for line in out:
        console.print(line, markup=False, soft_wrap=True)
