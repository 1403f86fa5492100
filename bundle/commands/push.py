"""`bundle push`: publish this lock's runtime image to `[image] repo` and print its digest. The work is the
push service's (bundle/service/push.py); this file parses and prints."""

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

    from bundle.service.push import PushRequest, push, write_outputs

    console = Console(highlight=False)
    request = PushRequest(lock=args.lock, image=args.image, dry_run=args.dry_run,
                          output=Path(args.output) if args.output else None,
                          sbom_out=Path(args.sbom_out) if args.sbom_out else None)
    pushed = push(request, console)
    for key, value in pushed.values.items():
        console.print(f"{key}={value}", markup=False, soft_wrap=True)
    write_outputs(request, pushed)
    return 0
