"""`bundle down tp4|pd [--volumes]`: stop and remove the topology's containers and network.

The model is a read-only bind mount and is never touched; the JIT cache volume is kept (a restart
then skips minutes of kernel compilation) unless --volumes asks for it explicitly.
"""

from __future__ import annotations

import argparse

from bundle.stack import docker
from bundle.commands._common import add_config_argument, add_topology_argument
from bundle.commands._project import launched

HELP = "stop a topology (containers and network; cache volumes kept unless --volumes)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser)
    add_config_argument(parser)
    parser.add_argument("--volumes", action="store_true",
                        help="also delete the JIT cache volume (the next start recompiles kernels)")
    parser.add_argument("--timeout", type=int, default=None, metavar="SECONDS",
                        help="override the stop grace period")


def run(args: argparse.Namespace) -> int:
    docker.require_engine()
    docker.require_compose()
    record = launched(args, args.topology)
    before = docker.project_containers(record.project)
    record.stack().down(volumes=args.volumes, timeout=args.timeout)
    left = docker.project_containers(record.project)
    if left:
        print(f"{record.project}: still present after down: {', '.join(left)}")
        return 1
    kept = "" if args.volumes else " (cache volume kept)"
    print(f"{record.project}: removed {len(before)} containers and its network{kept}")
    return 0
