"""`bundle pull`: fetch this lock's published worker image by digest, verified, or refuse it."""

from __future__ import annotations

import argparse

HELP = "pull the published image of this lock by digest; verify digest and lock-hash label"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lock", metavar="FILE", help="lock file (default: docker/lock.toml)")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from bundle.stack import docker
    from bundle.images.lock import load_lock
    from bundle.images.pull import not_published_error, pull_verified, target_from_lock

    lock = load_lock(args.lock)
    target = target_from_lock(lock)
    if not target.digest:
        raise not_published_error(target, str(lock.path))
    docker.require_engine()
    console = Console(highlight=False, stderr=False)
    with console.status(f"pulling {target.ref} ..."):
        facts = pull_verified(target)
    console.print(f"[green]ok[/] {target.ref}\n  lock hash {target.lock_hash} matches its label; "
                  f"tagged {target.tag_as} (image {facts.id[:19]})")
    return 0
