"""`bundle push`: publish this lock's runtime image to `[image] repo` and print its digest."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "push this lock's runtime image to [image] repo (docker/lock.toml); print the digest the registry recorded"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lock", metavar="FILE", help="lock file (default: docker/lock.toml)")
    parser.add_argument("--image", metavar="REF",
                        help="the local image to push (default: the lock's <repo>:lock-<hash>, what `bundle build` tags)")
    parser.add_argument("--dry-run", action="store_true",
                        help="push nothing: print (and with --output write) repo, registry and tag")
    parser.add_argument("--output", metavar="FILE",
                        help="append KEY=VALUE lines (repo, registry, tag, lock_hash; digest, ref, sbom_sha256 "
                             "after a push) to FILE: in GitHub Actions, $GITHUB_OUTPUT")
    parser.add_argument("--sbom-out", metavar="FILE", help="write the image's CycloneDX SBOM to FILE (for attestation)")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from bundle.images import publish
    from bundle.lock import load_lock
    from bundle.stack import engine

    lock = load_lock(args.lock)
    plan = publish.plan_push(lock, args.image)
    console = Console(highlight=False)
    if args.dry_run:
        values = plan.outputs()
    else:
        engine.require_engine()
        console.print(f"pushing {plan.source} as {plan.tag} to {plan.registry} ...", markup=False)
        published = publish.push(plan, sbom_out=Path(args.sbom_out) if args.sbom_out else None)
        values = published.outputs()
    for key, value in values.items():
        console.print(f"{key}={value}", markup=False, soft_wrap=True)
    if args.output:
        publish.write_outputs(Path(args.output), values)
    return 0
