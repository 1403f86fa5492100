"""The verbs' Slurm side (`--target slurm`): render the sbatch script; launch, status, logs and down
of a job (the rehearsal cluster's too). Parses nothing: the verbs hand their arguments over."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bundle.commands._common import prepare
from bundle.errors import EXIT_USAGE, BundleError


def rendered_job(args: argparse.Namespace, *, rehearsal: str | None = None, extra_env: dict | None = None,
                 dep=None):
    """(prepared compose render, the Slurm render): the same config and command lines as compose,
    checked by the compose rules and the Slurm ones."""
    from bundle.render import slurm
    from bundle.rules import slurm as slurm_rules

    prepared = prepare(args, args.topology, rehearsal=rehearsal, extra_env=extra_env, dep=dep)
    dep = prepared.dep
    slurm_rules.check(dep, prepared.topology).raise_if_errors(dep.source.name)
    job = slurm.render(dep, prepared.rendered)
    return prepared, job


def render_script(args: argparse.Namespace) -> int:
    from bundle.commands._common import rehearsal_env, resolve_rehearsal

    if not args.output:
        raise BundleError("--target slurm needs -o DIR, the folder to write job.sbatch to", exit_code=EXIT_USAGE,
                          hint=f"bundle render --target slurm {args.topology} -o slurm/{args.topology}")
    mode = resolve_rehearsal(args)
    prepared, job = rendered_job(args, rehearsal=mode, extra_env=rehearsal_env(mode))
    for warning in (*prepared.findings.warnings, *job.warnings):
        print(f"warning: {warning}", file=sys.stderr)
    path = Path(args.output) / "job.sbatch"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(job.native_script() if mode else job.script)
    path.chmod(0o755)
    print(path)
    what = ("the rehearsal's: the steps run natively on the cluster's node containers" if mode else
            "enroot/pyxis containers")
    print(f"# {job.job_name}: {job.total_nodes} nodes, steps {', '.join(s.name for s in job.steps)} ({what})\n"
          f"# submit: mkdir -p {prepared.dep.slurm.log_dir} && sbatch {path}", file=sys.stderr)
    return 0

