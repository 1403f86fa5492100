"""The Slurm wing: everything `--target slurm` is, in one folder. The same topologies, config and command
lines as compose, as one sbatch job in the style of NVIDIA's srt-slurm and Dynamo's slurm_jobs (`bundle
render --target slurm`), and its launch on the rehearsal cluster (a real slurmctld and slurmd nodes in
containers: `bundle launch --target slurm --rehearsal`).

config.py    its section of bundle.yaml (`slurm:`), typed (the core keeps it untyped: Deployment.wing_section)
commands.py  the compose command lines, changed only where a Slurm step needs it
script.py    the sbatch script of one topology: one srun step per role, the router on the first node
rules.py     the settings only Slurm reads, and `bash -n` on the script
client.py    Slurm's commands, run on a submit host or inside the rehearsal's controller
job.py       a submitted job: its record under runs/, its state and its steps' nodes
image.py     the rehearsal node image (rehearsal image + Debian's slurm-wlm and munge)
cluster.py   the rehearsal cluster: its config, munge key, compose project, up and down
stack.py     the verbs' view of a job on the rehearsal cluster (roles -> node containers)
launch.py    `bundle launch --target slurm --rehearsal`: the job submitted, ready with one box's meaning

TARGET is its one entry in bundle/targets/registry.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bundle.api import Target
from bundle.targets.slurm import launch, rules, script
from bundle.targets.slurm.cluster import project_for
from bundle.targets.slurm.script import SlurmRendered, for_target, render

if TYPE_CHECKING:
    from bundle.targets.slurm.stack import SlurmRehearsalStack

__all__ = ["TARGET", "SlurmRendered", "for_target", "render"]


# The job's stack view is a docker.Stack: imported when a verb asks for it, so that the registry, which
# every verb reads, does not import the Docker client (half a second) for `bundle render`.
def _stack(record) -> SlurmRehearsalStack:
    from bundle.targets.slurm.stack import SlurmRehearsalStack

    return SlurmRehearsalStack(record.project)


def _job_summary(project: str) -> dict | None:
    from bundle.targets.slurm.stack import job_summary

    return job_summary(project)


TARGET = Target("slurm", "one sbatch script, a srun step per role (enroot/pyxis; with --rehearsal, the "
                         "rehearsal cluster's native one), docs/slurm.md",
                renderer=script, stack=_stack, rules=rules, rehearsal=True,
                launcher=launch, project=project_for, status=_job_summary)
