"""`bundle validate [tp4|pd|dp] [-c FILE]`: schema, semantic rules and parser checks; starts nothing."""

from __future__ import annotations

import argparse
import sys

from bundle import topology as registry
from bundle.commands._common import add_config_argument, add_topology_argument, load, prepare

HELP = "check bundle.yaml (or the embedded defaults) for a topology; starts nothing"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True)
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    # Plain print, not rich: validate must answer fast and prints a line or two.
    dep = load(args)
    for topology in [args.topology] if args.topology else list(registry.NAMES):
        prepared = prepare(args, topology, dep=dep)
        for warning in prepared.findings.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        print(f"ok {topology}: {dep.source.name} is valid (project {dep.project_name(topology)})")
    return 0
