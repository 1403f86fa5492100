"""`bundle render tp4|pd|dp [-c FILE]`: write the env file and print compose's own resolved configuration;
`bundle render --target NAME tp4|pd|dp [-c FILE] -o DIR`: write the same topology for another engine
(the targets: bundle/targets/registry.py)."""

from __future__ import annotations

import argparse
import sys

import yaml

from bundle.commands._common import add_config_argument, add_rehearsal_argument, add_topology_argument, resolve_rehearsal
from bundle.errors import UsageError
from bundle.rehearsal import registry as rehearsal
from bundle.targets import registry as targets
from bundle.service.prepare import prepare
from bundle.service.render import render_target, resolve_compose, write_folder

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
                        help="; ".join(f"{t.name}{' (default)' if t.name == targets.DEFAULT else ''}: {t.help}"
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
    if args.rehearsal and not target.rehearsal:
        raise UsageError(f"--rehearsal is a compose overlay; the {target.name} render has none",
                         hint=f"leave out --rehearsal with --target {target.name}")
    dry_run = getattr(args, "kubectl_dry_run", False)
    if dry_run and not target.dry_run:
        checked = [t.name for t in targets.TARGETS.values() if t.dry_run]
        raise UsageError(f"--kubectl-dry-run checks a written folder of manifests; the {target.name} render "
                         f"has none to check",
                         hint=f"leave out --kubectl-dry-run, or render with --target {' or --target '.join(checked)}")
    if target.writes_folder:
        return _run_into_folder(args, target)
    return _run_compose(args)


def _run_compose(args: argparse.Namespace) -> int:
    import json

    # The rehearsal's image tag and model folder only: render never builds (launch --rehearsal does).
    prepared = prepare(args.topology, config=args.config, rehearsal=resolve_rehearsal(args))
    for warning in prepared.findings.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    made = resolve_compose(prepared.rendered)
    if args.format == "json":
        print(json.dumps(made.resolved, indent=2))
    else:
        print(yaml.safe_dump(made.resolved, sort_keys=False, width=120), end="")
    print(f"# env file: {made.env_file}\n# run it:   {made.command} up -d", file=sys.stderr)
    return 0


def _run_into_folder(args: argparse.Namespace, target: targets.Target) -> int:
    if not args.output:
        raise UsageError(f"--target {target.name} needs -o DIR, the folder to write to",
                         hint=f"bundle render --target {target.name} {args.topology} "
                              f"-o {target.name}/{args.topology}")
    # The compose render and its rules: the same command lines. A target that takes --rehearsal renders
    # the rehearsal's variant from the rehearsal's compose render.
    mode = resolve_rehearsal(args) if target.rehearsal else None
    made = render_target(target.renderer, target.rules, args.topology, config=args.config, rehearsal=mode)
    for warning in made.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    folder = write_folder(made, args.output, dry_run=target.dry_run if getattr(args, "kubectl_dry_run", False) else None)
    for path in folder.written:
        print(path)
    print(f"# {len(folder.written)} {made.output.summary()}; {folder.checked}\n"
          f"# {made.output.how_to_run(args.output)}", file=sys.stderr)
    return 0
