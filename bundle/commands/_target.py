"""Which running topology smoke and bench act on: the one named, else the one that is up."""

from __future__ import annotations

import argparse

from bundle.stack import docker
from bundle.stack import runstate
from bundle.commands._project import launched
from bundle.config.loader import TOPOLOGIES, Deployment, find_config, load_config
from bundle.errors import EXIT_ENVIRONMENT, BundleError

WORKER_SERVICES = {"tp4": {"tp4": "server"}, "pd": {"prefill": "prefill", "decode": "decode"}}


def running_target(args: argparse.Namespace) -> tuple[Deployment, str, runstate.LaunchRecord]:
    """(config, topology, launch record) of a topology that has containers; a BundleError if none."""
    dep = load_config(find_config(getattr(args, "config", None)))
    docker.require_engine()
    candidates = [args.topology] if args.topology else list(TOPOLOGIES)
    up = [t for t in candidates if docker.project_containers(dep.project_name(t))]
    if not up:
        names = " or ".join(dep.project_name(t) for t in candidates)
        raise BundleError(f"nothing to test: {names} is not running",
                          hint=f"`bundle launch {args.topology or 'tp4|pd'}` first (add --rehearsal "
                               "to rehearse without GPUs)", exit_code=EXIT_ENVIRONMENT)
    if len(up) > 1:
        raise BundleError("both tp4 and pd are running; name the one to test",
                          hint="e.g. `bundle smoke pd`", exit_code=EXIT_ENVIRONMENT)
    topology = up[0]
    return dep, topology, launched(args, topology)
