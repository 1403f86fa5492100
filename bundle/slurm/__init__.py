"""Slurm: the client the verbs use on a cluster (sbatch, squeue, scontrol, sacct, scancel), the job's
record, and the rehearsal cluster (a real slurmctld and slurmd nodes in containers).

client.py    Slurm's commands, run on a submit host or inside the rehearsal's controller
job.py       a submitted job: its record under runs/, its state and its steps' nodes
image.py     the rehearsal node image (rehearsal image + Debian's slurm-wlm and munge)
cluster.py   the rehearsal cluster: its config, munge key, compose project, up and down
stack.py     the verbs' view of a job on the rehearsal cluster (roles -> node containers)
"""
