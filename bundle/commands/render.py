"""`bundle render tp4|pd|dp [-c FILE]`: write the env file and print compose's own resolved configuration;
`bundle render --target NAME tp4|pd|dp [-c FILE] -o DIR`: write the same topology for another engine
(the targets: bundle/targets/registry.py)."""

from __future__ import annotations

import argparse
import sys

import yaml

from bundle.commands._common import add_config_argument, add_rehearsal_argument, add_topology_argument, resolve_rehearsal
from bundle.rehearsal import registry as rehearsal
from bundle.targets import registry as targets
from bundle.service.render import RenderRequest, render_compose, render_for, resolve_compose, write_requested

HELP = ("write runs/<project>/bundle.env and print the configuration exactly as docker compose resolves it; "
        f"--target {'|'.join(n for n in targets.NAMES if n != targets.DEFAULT)} writes the topology for "
        "another engine")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser)
    add_config_argument(parser)
    add_rehearsal_argument(parser, help="add a rehearsal overlay, no GPUs: " + "; ".join(
        f"{m.name}{' (default)' if m.name == rehearsal.BARE else ''} = {m.summary}" for m in rehearsal.MODES.values()))
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml")
    parser.add_argument("--target", choices=targets.NAMES, default=targets.DEFAULT,
                        help="; ".join(f"{t.name}{' (default)' if t.name == targets.DEFAULT else ''}: "
                                       f"{t.help.format(flag=rehearsal.FLAG, word=rehearsal.WORD)}"
                                       for t in targets.TARGETS.values()))
    parser.add_argument("-o", "--output", metavar="DIR",
                        help="the folder to write to, for a target other than compose (a new render there "
                             "replaces the files an earlier one wrote)")
    checked = [t for t in targets.TARGETS.values() if t.dry_run]
    if checked:  # the flag of the targets whose written folder an outside tool checks
        parser.add_argument("--kubectl-dry-run", action="store_true",
                            help="; ".join(f"--target {t.name}: {t.dry_run_help}" for t in checked))


def run(args: argparse.Namespace) -> int:
    target = targets.get(args.target)
    request = RenderRequest(args.topology, target, config=args.config,
                            # The rehearsal's image tag and model folder only: render never builds
                            # (launch --rehearsal does).
                            mode=resolve_rehearsal(args), output=args.output,
                            dry_run=getattr(args, "kubectl_dry_run", False))
    if target.writes_folder:
        return _run_into_folder(request)
    return _run_compose(request, args.format)


def _run_compose(request: RenderRequest, form: str) -> int:
    import json

    prepared = render_compose(request)
    for warning in prepared.findings.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    made = resolve_compose(prepared.rendered)
    if form == "json":
        print(json.dumps(made.resolved, indent=2))
    else:
        print(yaml.safe_dump(made.resolved, sort_keys=False, width=120), end="")
    print(f"# env file: {made.env_file}\n# run it:   {made.command} up -d", file=sys.stderr)
    return 0


def _run_into_folder(request: RenderRequest) -> int:
    made = render_for(request)
    for warning in made.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    folder = write_requested(request, made)
    for path in folder.written:
        print(path)
    print(f"# {len(folder.written)} {made.output.summary()}; {folder.checked}\n"
          f"# {made.output.how_to_run(request.output)}", file=sys.stderr)
    return 0
