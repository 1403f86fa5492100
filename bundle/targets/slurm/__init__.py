"""The Slurm wing: everything `--target slurm` is, in one folder. The same topologies, config and command
lines as compose, as one sbatch job in the style of NVIDIA's srt-slurm and Dynamo's slurm_jobs (`bundle
render --target slurm`), and its launch with no GPU on the container cluster (a real slurmctld and slurmd
nodes in containers made here: `bundle launch --target slurm` with a no-GPU mode, bundle.modes).

config.py    its section of bundle.yaml (`slurm:`), typed (the core keeps it untyped: Deployment.wing_section)
commands.py  the compose command lines, changed only where a Slurm step needs it
script.py    the sbatch script of one topology: one srun step per role, the router on the first node
rules.py     the settings only Slurm reads, and `bash -n` on the script
client.py    Slurm's commands, run on a submit host or inside the container cluster's controller
job.py       a submitted job: its record under runs/, its state and its steps' nodes
image.py     the container cluster's node image (the no-GPU modes' image + Debian's slurm-wlm and munge)
cluster.py   the container cluster: its config, munge key, compose project, up and down
stack.py     the verbs' view of a job on the container cluster (roles -> node containers)
launch.py    `bundle launch --target slurm` with a mode: the job submitted, ready with one box's meaning
config.schema.json, defaults.yaml   the section's schema and defaults, which the config loader adds to the core's
target.py    TARGET, its entry in bundle/targets/registry.py

This file declares the section (SECTION, SCHEMA, DEFAULTS) and imports nothing: the config loader reads it
(through bundle/targets/sections.py) before any wing runs, and a package's own file is imported with any
of its modules, so it must stay this light.
"""

from pathlib import Path

SECTION = "slurm"  # its key in bundle.yaml
READ_BY = "`bundle render|launch --target slurm`"  # who reads it, for messages and the reference
SCHEMA = Path(__file__).with_name("config.schema.json")  # the section's JSON Schema (its own $defs)
DEFAULTS = Path(__file__).with_name("defaults.yaml")  # `slurm:` and its defaults
