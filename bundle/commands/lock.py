"""`bundle lock set-digest DIGEST`: record the published digest in docker/lock.toml (one line), through
the lock service (bundle/service/lock.py)."""

from __future__ import annotations

import argparse

HELP = "edit docker/lock.toml: `set-digest DIGEST` records the published image's digest (nothing else changes)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    set_digest = sub.add_parser("set-digest", help="set [image] published_digest (the lock hash does not change)")
    set_digest.add_argument("digest", help="sha256:<64 hex>, as `bundle push` printed it")
    set_digest.add_argument("--lock", metavar="FILE", help="lock file (default: docker/lock.toml)")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from bundle.service.lock import SetDigestRequest, set_digest

    done = set_digest(SetDigestRequest(args.digest, lock=args.lock))
    Console(highlight=False).print(
        f"{done.lock.path}: [image] published_digest = {done.digest}" + ("" if done.changed else " (already set)")
        + f"; lock {done.lock.hash}, image {done.lock.image_repo}@{done.digest}", markup=False, soft_wrap=True)
    return 0
