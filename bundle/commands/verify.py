"""`bundle verify [tp4|pd|dp] [-c FILE] [--json]`: the running topology's containers against the lock
(image lock hash, installed set read from inside each); exits 1 on any FAIL."""

from __future__ import annotations

import argparse
import json

from bundle.commands._common import add_config_argument, add_topology_argument

HELP = "compare the running containers (their image and installed set) with docker/lock.toml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True, default_help="the one that is up")
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from bundle.commands._common import find_request
    from bundle.service.finding import one_running
    from bundle.service.verify import VerifyRequest, notable, verify

    target = one_running(find_request(args), verb="verify")
    verified = verify(VerifyRequest(target.project, target.containers))
    if args.json:
        print(json.dumps(verified.as_dict(), indent=2))
        return 1 if verified.failed else 0
    console = Console(highlight=False)
    table = Table(title=f"bundle verify {target.project} (lock {verified.lock_hash})")
    for col in ("container", "status", "what was found"):
        table.add_column(col, overflow="fold")
    for v in verified.reports:
        shown = notable(v)
        table.add_row(v.container, v.level.value, shown[0].what if shown else f"{v.image}: as the lock says")
        for f in shown[1:8]:
            table.add_row("", f.level.value, f.what)
    console.print(table)
    return 1 if verified.failed else 0
