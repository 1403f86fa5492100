"""The compose command lines, changed only where a Slurm step differs from a container on one host.

Servers keep every flag compose gives them. What changes: `--base-gpu-id` is 0 (Slurm's gres gives a
step only its own GPUs, as CUDA_VISIBLE_DEVICES); a server spread over several nodes gets `--nnodes`
and `--dist-init-addr` (its first node, from the allocation's node list), and `--node-rank` from
the task's own SLURM_PROCID when the step starts (one task per node). The router keeps every flag
except the worker URLs, which name the nodes of the allocation, and its port, which moves off the
worker port: it shares the first node with a server.
"""

from __future__ import annotations

from bundle.render.command_lines import router_args as _replace_workers, with_value as _with_value

MULTI_NODE_FLAGS = ("--nnodes", "--node-rank", "--dist-init-addr")
# Appended by the step's shell on each node: the rank is the task's, known only there.
NODE_RANK_SUFFIX = ("--node-rank", "$SLURM_PROCID")


def server_args(args: list[str], *, nodes: int, dist_init_addr: str | None) -> list[str]:
    """A compose server's arguments (after `-m sglang.launch_server`) as the step's tasks run them,
    less the per-task `--node-rank` (NODE_RANK_SUFFIX) of a multi-node server."""
    out = _with_value(list(args), "--base-gpu-id", "0")
    if nodes > 1:
        out += ["--nnodes", str(nodes), "--dist-init-addr", dist_init_addr]
    return out


def router_args(args: list[str], workers: list[str], *, port: int) -> list[str]:
    """The compose router's arguments with its worker options replaced by `workers` and its port."""
    return _with_value(_replace_workers(args, workers), "--port", str(port))
