"""`bundle logs [tp4|pd|dp] [SERVICE] [-f] [--tail N]`: the servers' and router's logs, read by the logs
service (bundle/service/logs.py) and written here as they come."""

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
    from bundle.commands._common import find_request
    from bundle.service.finding import one_running
    from bundle.service.logs import LogsRequest, logs

    target = one_running(find_request(args), verb="show the logs of").launched(config=False)
    batches = logs(LogsRequest(target, args.service, tail=args.tail, follow=args.follow))
    # Raw lines on stdout, not a console: a log is piped and grepped as the servers wrote it.
    for batch in batches:
        sys.stdout.writelines(f"{line}\n" for line in batch)
        if args.follow:
            sys.stdout.flush()
    return 0
