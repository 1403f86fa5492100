"""`bundle status [tp4|pd|dp] [--json]`: containers, health, restarts, ports, whether each server
answers, and whether the front door really serves (a one-token generation, not only /readiness).
The probes are the status service's (bundle/service/status.py); this file parses and prints."""

from __future__ import annotations

import argparse
import json

from bundle import modes
from bundle.commands._common import add_config_argument, add_topology_argument

HELP = "show what runs: containers, health, restarts, ports, hung or paused servers, and whether the front door serves"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True, default_help="every launched one")
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    from bundle.commands._common import find_request
    from bundle.service.finding import candidates
    from bundle.service.status import StatusRequest, status
    from bundle.targets import registry as targets

    found = candidates(find_request(args))
    shown = [t for t in found if t.up] or ([t for t in found] if args.topology else [])
    reports = []
    for t in shown:
        launched = t.launched()
        record = launched.record
        target = targets.get(record.target) if record is not None else None
        reports.append(status(StatusRequest(launched, target_name=target.name if target else None,
                                            target_status=target.status if target else None,
                                            default_target=targets.DEFAULT)))
    if args.json:
        data = [r.to_dict() for r in reports]
        print(json.dumps(data[0] if args.topology and len(data) == 1 else data, indent=2))
        return 0
    _print(reports)
    return 0


def _print(reports) -> None:
    from rich.table import Table

    from bundle.reporter import report_console

    console = report_console()
    if not reports:
        console.print("nothing is running (no launched topology has containers)")
    for one in reports:
        if not one.containers:
            console.print(f"{one.project}: not running")
            continue
        table = Table(title=f"{one.project} ({one.topology}"
                            f"{f', {modes.word()}: ' + one.mode if one.mode else ''})", title_justify="left")
        for column in ("service", "state", "health", "restarts", "published", "processes", "problem"):
            table.add_column(column, overflow="fold")
        for c in one.containers:
            published = ", ".join(b for binds in c.ports.values() for b in binds)
            problem = f"[red]{c.problem}[/]" if c.problem else "-"
            processes = ", ".join(sorted(set(c.processes or []))) or "-"
            table.add_row(c.service, c.state, c.health or "-", str(c.restarts), published or "-",
                          processes, problem)
        console.print(table)
        if one.target_view:  # what the target adds (Target.status): a job's queue and the roles it lost
            job = one.target_view
            console.print(job.get("queue") or job.get("error", ""), markup=False)
            for role, why in (job.get("lost") or {}).items():
                console.print(f"[red]{role} lost[/]: {why}")
        door = one.front_door
        mark = "[green]serving[/]" if door.serving else "[red]not serving[/]"
        console.print(f"front door {door.url}: {mark} ({door.detail})")
        if door.kv_path:
            console.print(f"[red]the KV transfer between prefill and decode fails[/]: {door.kv_path}\n"
                          f"  fix: {door.kv_path_fix}", markup=True)
        if one.standing is not None:
            console.print(one.standing.words, markup=False)
            if one.standing.command:
                console.print(f"bring it back: {one.standing.command}", markup=False)
