"""`bundle logs tp4|pd [SERVICE] [-f] [--tail N]`: the servers' and router's logs."""

from __future__ import annotations

import argparse
import sys

from bundle.stack import docker
from bundle.commands._common import add_config_argument, add_topology_argument
from bundle.commands._project import launched

HELP = "show (or follow) the logs of a topology's containers"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser)
    parser.add_argument("service", nargs="?", help="server (tp4); prefill, decode or router (pd)")
    add_config_argument(parser)
    parser.add_argument("-f", "--follow", action="store_true")
    parser.add_argument("--tail", type=int, default=None, metavar="N")


def run(args: argparse.Namespace) -> int:
    docker.require_engine()
    record = launched(args, args.topology)
    output = record.stack().logs(args.service, tail=args.tail, follow=args.follow, timestamps=False)
    if isinstance(output, str):
        sys.stdout.write(output)
        return 0
    for _source, chunk in output:  # python-on-whales streams (stdout|stderr, bytes)
        sys.stdout.write(chunk.decode(errors="replace"))
        sys.stdout.flush()
    return 0
