"""`bundle render tp4|pd|dp [-c FILE]`: write the env file and print compose's own resolved configuration;
`bundle render --target k8s tp4|pd|dp [-c FILE] -o DIR`: write the same topology as Kubernetes manifests;
`bundle render --target slurm tp4|pd|dp [-c FILE] -o DIR`: write it as one sbatch script."""

from __future__ import annotations

import argparse
import sys

import yaml

from bundle.commands._common import BARE_REHEARSAL, add_config_argument, add_topology_argument, prepare
from bundle.topology import REHEARSAL_MODES

HELP = ("write runs/<project>/bundle.env and print the configuration exactly as docker compose resolves it; "
        "--target k8s writes Kubernetes manifests, --target slurm an sbatch script")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser)
    add_config_argument(parser)
    parser.add_argument("--rehearsal", nargs="?", const=BARE_REHEARSAL, default=None,
                        choices=[*REHEARSAL_MODES, BARE_REHEARSAL], metavar="engine|sim",
                        help="add a rehearsal overlay, no GPUs: engine (default) = SGLang on CPU, sim = simulators")
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml")
    parser.add_argument("--target", choices=("compose", "k8s", "slurm"), default="compose",
                        help="compose (default): the env file and compose's view; k8s: LeaderWorkerSet + smg "
                             "manifests, checked against the Kubernetes and LeaderWorkerSet schemas; slurm: an "
                             "sbatch script (one srun step per role, enroot/pyxis), docs/slurm.md")
    parser.add_argument("-o", "--output", metavar="DIR",
                        help="--target k8s: folder to write the manifests to (one file per object); "
                             "--target slurm: folder to write job.sbatch to")
    parser.add_argument("--kubectl-dry-run", action="store_true",
                        help="--target k8s: also run `kubectl apply --dry-run=client` on them (needs a "
                             "kubectl whose context reaches a cluster: client dry-run asks the API server "
                             "what kinds exist)")


def run(args: argparse.Namespace) -> int:
    if args.target == "k8s":
        return _run_k8s(args)
    if args.target == "slurm":
        from bundle.commands._slurm import render_script

        return render_script(args)
    import json

    from bundle.stack import docker

    from bundle.commands._common import rehearsal_env, resolve_rehearsal

    # The tag and model folder only: render never builds (launch --rehearsal does).
    extra = rehearsal_env(resolve_rehearsal(args))
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


def _run_k8s(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bundle.errors import EXIT_USAGE, BundleError, ConfigError
    from bundle.render import k8s
    from bundle.rules import k8s as k8s_rules
    from bundle.rules import manifests

    if args.rehearsal:
        raise BundleError("--rehearsal is a compose overlay; the Kubernetes render has none",
                          exit_code=EXIT_USAGE, hint="leave out --rehearsal with --target k8s")
    if not args.output:
        raise BundleError("--target k8s needs -o DIR, the folder to write the manifests to",
                          exit_code=EXIT_USAGE, hint=f"bundle render --target k8s {args.topology} -o k8s/{args.topology}")
    prepared = prepare(args, args.topology)  # the compose render and its rules: the same command lines
    dep = prepared.dep
    k8s_rules.check(dep, prepared.topology).raise_if_errors(dep.source.name)
    rendered = k8s.render(dep, prepared.rendered)
    problems = manifests.problems(rendered.objects, rendered.file_names())
    if problems:
        raise ConfigError([f"{line}; the manifest was made from {dep.source.name}: check the kubernetes: "
                           f"value it came from, else report it as a bundle bug" for line in problems],
                          source=dep.source.name)
    for warning in (*prepared.findings.warnings, *rendered.warnings):
        print(f"warning: {warning}", file=sys.stderr)
    written = rendered.write(Path(args.output))
    checked = (f"checked: built-in kinds by kubernetes-validate (Kubernetes {manifests.KUBERNETES_VERSION}, "
               f"strict), LeaderWorkerSet by {manifests.LWS_SCHEMA_PATH.name}, the Prometheus Operator's "
               f"PodMonitor/PrometheusRule by {', '.join(p.name for p in manifests.OPERATOR_SCHEMAS.values())}")
    if args.kubectl_dry_run:
        ok, text = manifests.kubectl_dry_run(Path(args.output))
        if ok is False:
            raise BundleError(f"kubectl apply --dry-run=client refused {args.output}:\n{text}")
        checked += f"; kubectl: {text}"
    for path in written:
        print(path)
    print(f"# {len(written)} manifests for {args.topology} in namespace {rendered.namespace}; {checked}\n"
          f"# apply: kubectl apply -f {args.output}   (needs the LeaderWorkerSet controller installed)",
          file=sys.stderr)
    return 0
