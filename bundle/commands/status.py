"""`bundle status [tp4|pd|dp] [--json]`: containers, health, restarts, ports, whether each server
answers, and whether the front door really serves (a one-token generation, not only /readiness)."""

from __future__ import annotations

import argparse
import json

from bundle.commands._common import add_config_argument, add_topology_argument
from bundle.rehearsal import registry as rehearsal
from bundle.targets import registry as targets

HELP = "show what runs: containers, health, restarts, ports, hung or paused servers, and whether the front door serves"
WORKER_PROBE_SECONDS = 5  # a server that cannot answer /health in this long is flagged as hung
FRONT_PROBE_SECONDS = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True, default_help="every launched one")
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def front_door_serves(front) -> dict:
    """Serving = the readiness path answers 200 and a one-token generation comes back in time."""
    import requests

    from bundle.stack.ready import front_door_state

    door = {"url": front.url, "serving": False}
    ok, detail = front_door_state(front, timeout=FRONT_PROBE_SECONDS)
    door["detail"] = detail
    if not ok:
        return door
    try:
        reply = requests.post(front.chat_url, json=front.chat_body("ping", max_tokens=1), headers=front.headers,
                              timeout=FRONT_PROBE_SECONDS)
        door["serving"] = reply.status_code == 200
        door["status"] = reply.status_code
        door["detail"] += f"; a one-token generation: HTTP {reply.status_code}"
    except requests.RequestException as exc:
        door["detail"] += f"; a one-token generation: {type(exc).__name__} within {FRONT_PROBE_SECONDS} s"
    return door


def _server_problem(state, workers, service: str) -> str | None:
    if state.state == "paused":
        return "paused: its processes are frozen (`docker unpause` or `bundle launch` again)"
    if state.state != "running":
        return None
    reply = workers.get(service, "/health", timeout=WORKER_PROBE_SECONDS)
    if reply.status == 0 and "timed out" in reply.text.lower():
        return f"hung: /health gave no answer within {WORKER_PROBE_SECONDS} s"
    if reply.status == 0:
        return f"not answering: {reply.text[:120]}"
    return None


def _kv_path(target, workers) -> dict:
    """When a disaggregated front door answers server errors: the KV path's evidence, as launch's
    early stop names it (bundle/verify/kv_path.py), if decode counts failed transfers."""
    from bundle.errors import BundleError
    from bundle.verify import kv_path

    router = target.topology.router
    try:
        log = str(target.stack().logs(router.name, tail=200)) if router else ""
    except BundleError:
        log = ""
    found = kv_path.evidence(workers, target.topology, router_log=log)
    return {"kv_path": found.text(), "kv_path_fix": kv_path.HINT} if found.broken else {}


def collect(target) -> dict:
    from bundle.stack.frontdoor import front_door
    from bundle.stack.workers import ComposeWorkers

    record = target.launch if target.up else target.record
    states = target.stack().states() if target.up else []
    door = {"url": None, "serving": False, "detail": "not running"}
    servers = {s.name for s in target.topology.servers}
    containers = []
    if states:
        dep = target.dep
        workers = ComposeWorkers(target.stack(), {name: name for name in servers}, port=dep.network.worker_port)
        door = front_door_serves(front_door(dep, target.topology))
        if target.topology.disaggregated and door.get("status", 0) >= 500:
            door.update(_kv_path(target, workers))
    for s in states:
        problem = _server_problem(s, workers, s.service) if s.service in servers else (
            "paused" if s.state == "paused" else None)
        from bundle.stack.engine import container_processes

        # What really runs inside (SGLang names its processes: sglang::scheduler, ...; the simulator
        # is one python): names only, never arguments.
        processes = container_processes(s.name) if s.state in ("running", "paused") else []
        containers.append({"service": s.service, "name": s.name, "state": s.state, "health": s.health,
                           "restarts": s.restart_count, "exit_code": s.exit_code, "ports": s.ports,
                           "problem": problem, "processes": processes})
    out = {"topology": target.topology.name, "project": target.project,
           "rehearsal": rehearsal.name_of(rehearsal.parse(record.rehearsal if record else None)), "containers": containers, "front_door": door}
    if record is not None and targets.get(record.target).status is not None:
        out[record.target] = targets.get(record.target).status(target.project)  # e.g. the Slurm job: squeue, sinfo
    return out


def run(args: argparse.Namespace) -> int:
    from bundle.commands._target import candidates

    found = candidates(args)
    shown = [t for t in found if t.up] or ([t for t in found] if args.topology else [])
    reports = [collect(t) for t in shown]
    if args.json:
        print(json.dumps(reports[0] if args.topology and len(reports) == 1 else reports, indent=2))
        return 0
    from rich.table import Table

    from bundle.reporter import report_console

    console = report_console()
    if not reports:
        console.print("nothing is running (no launched topology has containers)")
    for one in reports:
        if not one["containers"]:
            console.print(f"{one['project']}: not running")
            continue
        table = Table(title=f"{one['project']} ({one['topology']}"
                            f"{', rehearsal: ' + one['rehearsal'] if one['rehearsal'] else ''})", title_justify="left")
        for column in ("service", "state", "health", "restarts", "published", "processes", "problem"):
            table.add_column(column, overflow="fold")
        for c in one["containers"]:
            published = ", ".join(b for binds in c["ports"].values() for b in binds)
            problem = f"[red]{c['problem']}[/]" if c["problem"] else "-"
            processes = ", ".join(sorted(set(c.get("processes") or []))) or "-"
            table.add_row(c["service"], c["state"], c["health"] or "-", str(c["restarts"]), published or "-",
                          processes, problem)
        console.print(table)
        if one.get("slurm"):
            job = one["slurm"]
            console.print(job.get("queue") or job.get("error", ""), markup=False)
            for role, why in (job.get("lost") or {}).items():
                console.print(f"[red]{role} lost[/]: {why}")
        door = one["front_door"]
        mark = "[green]serving[/]" if door["serving"] else "[red]not serving[/]"
        console.print(f"front door {door['url']}: {mark} ({door['detail']})")
        if door.get("kv_path"):
            console.print(f"[red]the KV transfer between prefill and decode fails[/]: {door['kv_path']}\n"
                          f"  fix: {door['kv_path_fix']}", markup=True)
    return 0
