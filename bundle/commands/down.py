"""`bundle down [tp4|pd|dp] [--volumes]`: stop and remove the topology's containers and network.

Like `docker compose down`, it needs no topology: the one that is up is found from the launch
records. The model is a read-only bind mount and is never touched; the JIT cache volume is kept (a
restart then skips minutes of kernel compilation) unless --volumes asks for it explicitly.
"""

from __future__ import annotations

import argparse

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
    from bundle.commands._target import candidates, one_running
    from bundle.stack import docker, engine

    engine.require_engine()
    engine.require_compose()
    if not any(t.up for t in candidates(args)):
        print("nothing to take down: no launched topology has containers")
        return 0
    target = one_running(args, verb="take down")
    before = target.containers
    volumes_removed = target.stack().down(volumes=args.volumes, timeout=args.timeout)
    left = docker.project_containers(target.project) + docker.project_networks(target.project)
    # Only the volumes its launch recorded as made are down's to remove: compose keeps the cache
    # and data volumes by design, and another target's launch under the same project name made others.
    own = set(target.record.created_volumes) if target.record else set()
    volumes = docker.project_volumes(target.project)
    if volumes_removed:
        left += sorted(own & set(volumes))
    if left:
        print(f"{target.project}: still present after down: {', '.join(left)}")
        return 1
    kept = "" if volumes_removed else " (cache volume kept)"
    print(f"{target.project}: removed {len(before)} containers and its network{kept}")
    alone = sorted(set(volumes) - own) if volumes_removed else []
    if alone:
        print(f"{target.project}: left alone (not made by this launch): {', '.join(alone)}")
    return 0
