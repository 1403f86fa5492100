"""`bundle validate [tp4|pd] [-c FILE]`: schema, semantic rules and parser checks; starts nothing."""

from __future__ import annotations

import argparse

from bundle.commands._common import add_config_argument, add_topology_argument, load_checked
from bundle.config import TOPOLOGIES

HELP = "check bundle.yaml (or the embedded defaults) for a topology; starts nothing"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True)
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    # rich is imported here, not at the top: validate must answer fast and prints little.
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    for topology in [args.topology] if args.topology else list(TOPOLOGIES):
        dep, findings = load_checked(args, topology)
        for warning in findings.warnings:
            console.print(f"[yellow]warning:[/] {warning}", markup=True)
        console.print(f"[green]ok[/] {topology}: {dep.source.name} is valid "
                      f"(project {dep.project_name(topology)})", markup=True)
    return 0
