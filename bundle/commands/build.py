"""`bundle build`: build the layered images from docker/lock.toml, reusing unchanged layers."""

from __future__ import annotations

import argparse

from rich.console import Console

from bundle.images import build
from bundle.lock import load_lock

HELP = "build the layered images pinned by docker/lock.toml (--dry-run prints the plan)"

# BuildKit's plain progress: a step header ("#7 [3/4] RUN ...") or an error line.


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true",
                        help="print the layers, tags and build arguments; build nothing")
    parser.add_argument("--layer", nargs="+", metavar="NAME", choices=None, default=None,
                        help=f"build only these layers (rebuilt even if tagged), one of: "
                             f"{', '.join(build.LAYER_NAMES)}")
    parser.add_argument("--no-cache", action="store_true", help="rebuild every step, reuse nothing")
    parser.add_argument("--standin", action="store_true",
                        help="a local build, never pushed: the same layers named <repo>-standin without the "
                             "registry (CI, the rehearsal's parent)")
    parser.add_argument("--kernels", nargs="+", metavar="NAME", default=None,
                        help="compile only these FlashInfer modules in the kernels layer (default: every module "
                             "the predicted choices may load, with --standin too)")
    parser.add_argument("--no-sbom", action="store_true",
                        help="build the runtime layer without the CycloneDX SBOM (and its label)")
    parser.add_argument("--lock", default=None, help="path of the lock (default docker/lock.toml)")


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    lock = load_lock(args.lock)
    plan = build.make_plan(lock, standin=args.standin, kernels=args.kernels)
    layers = build.select_layers(plan, args.layer)
    if args.dry_run:
        _print_plan(console, plan, layers)
        return 0
    results = build.execute(plan, layers, use_cache=not args.no_cache, force=bool(args.layer),
                            with_sbom=not args.no_sbom,
                            report=lambda msg: console.print(msg, markup=False),
                            progress=lambda msg: console.print(f"    {msg}", style="dim", markup=False,
                                                               soft_wrap=True))
    built = sum(1 for r in results if r.action == "built")
    console.print(f"done: {built} built, {len(results) - built} reused; "
                  f"image {plan.layers[-1].extra_tags[0] if plan.layers[-1].extra_tags else plan.layers[-1].tag} "
                  f"(lock {lock.hash})", markup=False)
    return 0


def _print_plan(console: Console, plan: build.Plan, layers: list[build.LayerPlan]) -> None:
    """Plain lines, not a table: the plan is read in CI logs and terminals of any width."""
    lock = plan.lock
    out = [f"lock {lock.path}  hash {lock.hash}  image {plan.layers[-1].extra_tags[0]}"
           + ("  (local build, never pushed: named without the registry)" if plan.standin else "")]
    states = _states(layers)
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


def _states(layers: list[build.LayerPlan]) -> dict[str, str]:
    """'(built: will be reused)' / '(to build)' per layer, or nothing when no engine answers."""
    from bundle.stack import engine
    from bundle.errors import EnvironmentProblem

    try:
        engine.require_engine()
    except EnvironmentProblem:
        return {}
    return {lp.name: "(built: will be reused)" if engine.image_facts(lp.tag) else "(to build)"
            for lp in layers}
