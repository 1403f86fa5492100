"""`bundle pull`: fetch this lock's published worker image by digest, verified, or refuse it. The work is
the pull service's (bundle/service/pull.py); this file parses and prints."""

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

    from bundle.service.pull import PullRequest, pull

    console = Console(highlight=False, stderr=False)
    err = Console(highlight=False, stderr=True)
    pulled = pull(PullRequest(lock=args.lock, require_signature=args.require_signature), err)
    report, target = pulled.report, pulled.target
    for check in report.checks:
        style = "green" if check.status == "ok" else "bold yellow"
        console.print(f"[{style}]{check.status:<11}[/] {check.check:<9} {escape(check.detail)}", soft_wrap=True)
    console.print(f"[green]accepted[/] {target.ref}\n  tagged {target.tag_as} (image {report.facts.id[:19]})",
                  soft_wrap=True)
    for check in report.not_checked:
        err.print(f"warning: {check.check} NOT CHECKED: {check.detail}", markup=False, soft_wrap=True)
    return 0
