"""`bundle render tp4|pd|dp [-c FILE]`: write the env file and print compose's own resolved configuration."""

from __future__ import annotations

import argparse
import sys

import yaml

from bundle.commands._common import add_config_argument, add_topology_argument, prepare

HELP = "write runs/<project>/bundle.env and print the configuration exactly as docker compose resolves it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser)
    add_config_argument(parser)
    parser.add_argument("--rehearsal", action="store_true",
                        help="add the rehearsal overlay (simulated workers, no GPUs)")
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml")


def run(args: argparse.Namespace) -> int:
    import json

    from bundle.stack import docker

    extra = {}
    if args.rehearsal:
        from bundle.images import rehearsal as rehearsal_image
        from bundle.render import rehearsal

        # The tag only: render never builds (launch --rehearsal does).
        extra = rehearsal.env_values(rehearsal_image.image_tag())
    prepared = prepare(args, args.topology, rehearsal=args.rehearsal, extra_env=extra)
    for warning in prepared.findings.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    rendered = prepared.rendered
    rendered.write()
    docker.require_compose()
    resolved = docker.stack_of(rendered).config()
    if args.format == "json":
        print(json.dumps(resolved, indent=2))
    else:
        print(yaml.safe_dump(resolved, sort_keys=False, width=120), end="")
    print(f"# env file: {rendered.env_file}\n# run it:   {rendered.compose_command()} up -d",
          file=sys.stderr)
    return 0
