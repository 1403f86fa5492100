"""`bundle logs [tp4|pd|dp] [SERVICE] [-f] [--tail N]`: the servers' and router's logs."""

from __future__ import annotations

import argparse
import sys

from bundle.commands._common import add_config_argument, add_topology_argument

HELP = "show (or follow) the logs of a topology's containers"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True, default_help="the one that is up")
    parser.add_argument("service", nargs="?", help="a service of the topology (server; prefill, decode, router; "
                                                   "replica-0 ...); default: all")
    add_config_argument(parser)
    parser.add_argument("-f", "--follow", action="store_true")
    parser.add_argument("--tail", type=int, default=None, metavar="N")


def run(args: argparse.Namespace) -> int:
    from bundle.commands._target import one_running
    from bundle.errors import UsageError

    target = one_running(args, verb="show the logs of")
    names = [s.name for s in target.topology.services]
    if args.service and args.service not in names:
        raise UsageError(f"{target.topology.name} has no service {args.service!r}; its services: "
                         f"{', '.join(names)}")
    output = target.stack().logs(args.service, tail=args.tail, follow=args.follow, timestamps=False)
    if isinstance(output, str):
        sys.stdout.write(output)
        return 0
    for _source, chunk in output:  # python-on-whales streams (stdout|stderr, bytes)
        sys.stdout.write(chunk.decode(errors="replace"))
        sys.stdout.flush()
    return 0
