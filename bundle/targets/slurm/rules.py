"""Semantic rules of the Slurm render that span keys of bundle.yaml (the schema holds each key alone).
All problems are collected; each names the file, the line, the key path and the fix."""

from __future__ import annotations


from bundle.config.model import Deployment
from bundle.config.source import format_path
from bundle.targets.slurm import commands
from bundle.targets.slurm import config as slurm_config
from bundle.rules.check import RulesReport
from bundle.run import run
from bundle.topology import Topology


def check(dep: Deployment, topology: Topology) -> RulesReport:
    found = RulesReport()
    error = found.errors_of(dep.source)

    s = slurm_config.of(dep)
    if topology.has_router and s.router_port == dep.network.worker_port:
        error(("slurm", "router_port"), f"{s.router_port} is also network.worker_port, and the router shares the "
                                        f"first node with a server: choose another port (e.g. 8000)")
    seen = set()
    for role in dep.roles(topology):
        key = role.service.config_key
        if key in seen:
            continue
        seen.add(key)
        nodes, path = s.nodes(key), s.key_path(key)
        if role.tp_size % nodes:
            error(path, f"tp_size {role.tp_size} ({format_path(role.key_path + ('tp_size',))}) does not divide over "
                        f"{nodes} nodes; each node runs tp_size / nodes ranks: use a divisor of {role.tp_size}")
        elif role.tp_size // nodes > s.gpus_per_node:
            error(path, f"{role.tp_size // nodes} GPUs per node for {format_path(role.key_path)} but "
                        f"slurm.gpus_per_node is {s.gpus_per_node}: spread it over more nodes")
        managed = set(commands.MULTI_NODE_FLAGS) if nodes > 1 else set()
        for index, token in enumerate(role.extra_args):
            flag = str(token).split("=", 1)[0]
            if flag in managed:
                error(role.key_path + ("extra_args", index),
                      f"{flag} is set by the Slurm render (from {format_path(path)}); change that key instead "
                      f"of passing the flag")
    return found


CHECKED = "bash -n (the script parses) and the Slurm rules of bundle.yaml"


def problems(output) -> list[str]:
    """What is wrong with a rendered script (empty when nothing): bash must parse it."""
    script = output.native_script() if output.native else output.script
    proc = run(["bash", "-n"], input=script, timeout=60, check=False)  # parsing a page of shell: instant
    return [] if proc.returncode == 0 else [f"the sbatch script for {output.topology.name} does not parse: "
                                             f"{proc.stderr.strip()}"]
