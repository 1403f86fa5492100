"""The host ports the deployment publishes are free, or who holds them."""

from __future__ import annotations

from pathlib import Path

from bundle.doctor import port_owners
from bundle.doctor.context import HostContext
from bundle.doctor.core import CheckResult, fail, ok, skip


def ports(ctx: HostContext) -> CheckResult:
    if not ctx.ports:
        return skip("no host port to check", "pass --port PORT or a bundle.yaml with network.front_port")
    taken = []
    checked = []
    use_proc = Path("/proc/net/tcp").exists()
    for host, port, what in ctx.ports:
        checked.append({"host": host, "port": port, "for": what})
        if use_proc:
            holders = port_owners.conflicts(host, port)
            descriptions = [_describe(h) for h in holders]
        else:
            descriptions = [] if port_owners.bind_free(host, port) else [f"{host}:{port} (owner unknown)"]
        if descriptions:
            taken.append({"host": host, "port": port, "for": what, "held_by": descriptions})
    details = {"checked": checked, "taken": taken}
    if taken:
        first = taken[0]
        return fail("; ".join(f"{t['for']} port {t['port']} is taken: {', '.join(t['held_by'])}" for t in taken),
                    f"stop what holds port {first['port']} (`bundle down` if it is ours) or choose "
                    "another port in bundle.yaml (network.front_port)", **details)
    return ok(", ".join(f"{host}:{port} ({what})" for host, port, what in ctx.ports) + " free", **details)


def _describe(listener: port_owners.Listener) -> str:
    text = listener.describe()
    if listener.process == "docker-proxy":
        from bundle.stack import engine

        names = engine.containers_publishing(listener.port)
        if names:
            text += f" for container {', '.join(names)}"
    return text
