"""TARGET: the slurm wing's one entry in bundle/targets/registry.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bundle.api import Target
from bundle.targets.slurm import launch, rules, script
from bundle.targets.slurm.cluster import project_for

if TYPE_CHECKING:
    from bundle.targets.slurm.stack import SlurmClusterStack


# The job's stack view is a docker.Stack: imported when a verb asks for it, so that the registry, which
# every verb reads, does not import the Docker client (half a second) for `bundle render`.
def _stack(record) -> SlurmClusterStack:
    from bundle.targets.slurm.stack import SlurmClusterStack

    return SlurmClusterStack(record.project)


def _job_summary(project: str) -> dict | None:
    from bundle.targets.slurm.stack import job_summary

    return job_summary(project)


TARGET = Target("slurm", "one sbatch script, a srun step per role (enroot/pyxis; with {flag}, the "
                         "{word} cluster's native one), docs/slurm.md",
                renderer=script, stack=_stack, rules=rules, takes_mode=True,
                launcher=launch, project=project_for, status=_job_summary,
                launch_help="one sbatch job (with {flag}: on a real Slurm cluster of containers made here, "
                            "docs/slurm.md)")
