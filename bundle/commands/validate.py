"""`bundle validate [tp4|pd] [-c FILE]`: schema, semantic rules and parser checks; starts nothing."""

from __future__ import annotations

import argparse
import sys

from bundle.commands._common import add_config_argument, add_topology_argument, load_checked
from bundle.config.loader import TOPOLOGIES

HELP = "check bundle.yaml (or the embedded defaults) for a topology; starts nothing"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True)
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    # Plain print, not rich: validate must answer fast and prints a line or two.
    for topology in [args.topology] if args.topology else list(TOPOLOGIES):
        dep, findings = load_checked(args, topology)
        for warning in findings.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        print(f"ok {topology}: {dep.source.name} is valid (project {dep.project_name(topology)})")
    return 0
