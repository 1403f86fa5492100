"""`bundle down [tp4|pd|dp] [--volumes]`: stop and remove the topology's containers and network.

Like `docker compose down`, it needs no topology: the one that is up is found from the launch
records. The model is a read-only bind mount and is never touched; the JIT cache volume is kept (a
restart then skips minutes of kernel compilation) unless --volumes asks for it explicitly. The work is
the down service's (bundle/service/down.py); this file parses and prints.
"""

from __future__ import annotations

import argparse
import dataclasses

from bundle.commands._common import add_config_argument, add_topology_argument

HELP = "stop a topology (containers and network; cache volumes kept unless --volumes)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True, default_help="the one that is up")
    add_config_argument(parser)
    parser.add_argument("--volumes", action="store_true",
                        help="also delete the JIT cache volume (the next start recompiles kernels)")
    parser.add_argument("--timeout", type=int, default=None, metavar="SECONDS",
                        help="override the stop grace period")


def run(args: argparse.Namespace) -> int:
    from bundle.commands._common import find_request
    from bundle.service.finding import candidates, only_running
    from bundle.service.down import DownRequest, down, require_docker

    require_docker()
    target = None
    found = candidates(find_request(args))  # looked up once: which are up, and the one to take down
    if any(t.up for t in found):
        chosen = only_running(found, args.topology, verb="take down")
        # The volumes down answers for are those the launch record names as made (not a record
        # rendered again for a project that has none).
        target = dataclasses.replace(chosen.launched(config=False), record=chosen.record)
    return _print(down(DownRequest(target, volumes=args.volumes, timeout=args.timeout)))


def _print(result) -> int:
    if result.project is None:
        print("nothing to take down: no launched topology has containers")
        return 0
    if not result.ok:
        print(f"{result.project}: still present after down: {', '.join(result.left)}")
        return 1
    kept = "" if result.volumes_removed else " (cache volume kept)"
    print(f"{result.project}: removed {result.removed} containers and its network{kept}")
    if result.alone:
        print(f"{result.project}: left alone (not made by this launch): {', '.join(result.alone)}")
    return 0
