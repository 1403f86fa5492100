"""`bundle pull`: fetch this lock's published worker image by digest, verified, or refuse it."""

from __future__ import annotations

import argparse

HELP = "pull the published image of this lock by digest; verify digest, label, signature, SBOM, contents"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lock", metavar="FILE", help="lock file (default: docker/lock.toml)")
    parser.add_argument("--require-signature", action="store_true",
                        help="refuse the image when its signature cannot be verified (cosign missing)")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from bundle.lock import load_lock
    from bundle.images.pull import not_published_error, pull_verified, target_from_lock
    from bundle.stack import engine

    lock = load_lock(args.lock)
    target = target_from_lock(lock)
    if not target.digest:
        raise not_published_error(target, str(lock.path))
    engine.require_engine()
    console = Console(highlight=False, stderr=False)
    err = Console(highlight=False, stderr=True)
    report = pull_verified(target, lock, require_signature=args.require_signature,
                           on_progress=lambda msg: err.print(msg, markup=False))
    for check in report.checks:
        style = "green" if check.status == "ok" else "bold yellow"
        console.print(f"[{style}]{check.status:<11}[/] {check.check:<9} {escape(check.detail)}", soft_wrap=True)
    console.print(f"[green]accepted[/] {target.ref}\n  tagged {target.tag_as} (image {report.facts.id[:19]})",
                  soft_wrap=True)
    for check in report.not_checked:
        err.print(f"warning: {check.check} NOT CHECKED: {check.detail}", markup=False, soft_wrap=True)
    return 0
