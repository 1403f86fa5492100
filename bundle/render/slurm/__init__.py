"""The Slurm render target: the same topologies, config and command lines as compose, as one sbatch
job in the style of NVIDIA's srt-slurm and Dynamo's slurm_jobs (`bundle render --target slurm`).

commands.py  the compose command lines, changed only where a Slurm step needs it
script.py    the sbatch script of one topology: one srun step per role, the router on the first node
"""

from __future__ import annotations

import dataclasses

from bundle.render.slurm.script import SlurmRendered, render

__all__ = ["SlurmRendered", "for_target", "render"]


def for_target(dep, rendered, *, rehearsal: str | None = None) -> SlurmRendered:
    """The render target's entry (bundle/service/targets.py): the job script; with a rehearsal mode, the
    rehearsal's script, whose steps run natively on the cluster's node containers (its one substitution)."""
    job = render(dep, rendered)
    return dataclasses.replace(job, native=True) if rehearsal else job
