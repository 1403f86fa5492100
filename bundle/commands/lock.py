"""`bundle lock set-digest DIGEST`: record the published digest in docker/lock.toml (one line)."""

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

    from bundle.lock import default_lock_path
    from bundle.images.lock_edit import set_published_digest

    path = args.lock or default_lock_path()
    lock, changed = set_published_digest(path, args.digest)
    Console(highlight=False).print(
        f"{lock.path}: [image] published_digest = {args.digest}" + ("" if changed else " (already set)")
        + f"; lock {lock.hash}, image {lock.image_repo}@{args.digest}", markup=False, soft_wrap=True)
    return 0
