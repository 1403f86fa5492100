"""The Slurm render target: the same topologies, config and command lines as compose, as one sbatch
job in the style of NVIDIA's srt-slurm and Dynamo's slurm_jobs (`bundle render --target slurm`).

commands.py  the compose command lines, changed only where a Slurm step needs it
script.py    the sbatch script of one topology: one srun step per role, the router on the first node
"""

from bundle.render.slurm.script import SlurmRendered, render

__all__ = ["SlurmRendered", "render"]
