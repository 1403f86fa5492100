"""The compose command lines, changed only where pods differ from containers on one host.

Servers keep every flag compose gives them. What changes: `--base-gpu-id` is 0 (a pod sees only
the GPUs the device plugin gave it); a server spread over several nodes gets `--nnodes`,
`--node-rank` and `--dist-init-addr` from LeaderWorkerSet's environment (kubelet expands `$(VAR)`
in args); mooncake gets `--disaggregation-ib-device` (NIXL ignores that flag, sglang #28737: it
gets UCX_NET_DEVICES instead, see pods.py). The router keeps every flag except the worker URLs,
which become smg's Kubernetes service discovery (label selectors) or the leaders' stable DNS names.
"""

from __future__ import annotations

import re

from bundle.render.command_lines import ROUTER_WORKER_OPTIONS, router_args, with_value  # noqa: F401 (the k8s wing's words too)

# Environment LeaderWorkerSet puts into every container of a group (leaderworkerset.x-k8s.io/v1).
LWS_LEADER_ADDRESS = "LWS_LEADER_ADDRESS"
LWS_WORKER_INDEX = "LWS_WORKER_INDEX"
LWS_GROUP_SIZE = "LWS_GROUP_SIZE"
# Labels LeaderWorkerSet puts on its pods; worker index 0 is the leader, the one serving HTTP.
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
# The pod annotation smg reads a prefill server's bootstrap port from (smg's default name).
BOOTSTRAP_PORT_ANNOTATION = "sglang.ai/bootstrap-port"
MULTI_NODE_FLAGS = ("--nnodes", "--node-rank", "--dist-init-addr")
IB_DEVICE_FLAG = "--disaggregation-ib-device"
IB_TRANSFER_BACKENDS = ("mooncake",)  # the backends whose SGLang code reads --disaggregation-ib-device


def server_args(args: list[str], *, nodes: int, dist_init_port: int, ib_devices: tuple[str, ...] = (),
                transfer_backend: str | None = None) -> list[str]:
    """A compose server's arguments (after `-m sglang.launch_server`) as a pod of `nodes` runs them."""
    out = with_value(list(args), "--base-gpu-id", "0")
    if nodes > 1:
        out += ["--nnodes", str(nodes), "--node-rank", f"$({LWS_WORKER_INDEX})",
                "--dist-init-addr", f"$({LWS_LEADER_ADDRESS}):{dist_init_port}"]
    if ib_devices and transfer_backend in IB_TRANSFER_BACKENDS:
        out += [IB_DEVICE_FLAG, ",".join(d.split(":", 1)[0] for d in ib_devices)]
    return out


def selector(labels: dict[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in labels.items()]


_KUBELET_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def kubelet_expand(token: str, env: dict[str, str]) -> str:
    """`$(VAR)` in a container's args as kubelet expands it: a defined variable is replaced, an
    undefined reference stays as written, `$$` is a literal `$`."""
    def replace(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _KUBELET_REF.sub(replace, token)
