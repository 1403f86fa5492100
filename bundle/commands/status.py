"""`bundle status [tp4|pd] [--json]`: containers, health, restarts, ports and front-door readiness."""

from __future__ import annotations

import argparse
import json

import requests

from bundle.stack import docker
from bundle.commands._common import add_config_argument
from bundle.commands._project import launched
from bundle.config.loader import TOPOLOGIES, find_config, load_config
from bundle.stack.frontdoor import front_door

HELP = "show what runs: containers, health, restarts, ports, and whether the front door serves"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topology", nargs="?", choices=TOPOLOGIES, help="tp4 or pd (default: both)")
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def collect(args: argparse.Namespace, topology: str) -> dict:
    dep = load_config(find_config(args.config))
    record = launched(args, topology)
    states = record.stack().states() if docker.project_containers(record.project) else []
    front = front_door(dep)
    door = {"url": front.url, "serving": False, "detail": "not running"}
    if states:
        path = "/readiness" if topology == "pd" else "/health"
        try:
            code = requests.get(front.url + path, headers=front.headers, timeout=5).status_code
            door.update(serving=code == 200, detail=f"{path}: HTTP {code}")
        except requests.RequestException as exc:
            door["detail"] = f"{path}: {type(exc).__name__}"
    return {"topology": topology, "project": record.project, "rehearsal": record.rehearsal,
            "containers": [{"service": s.service, "name": s.name, "state": s.state, "health": s.health,
                            "restarts": s.restart_count, "exit_code": s.exit_code, "ports": s.ports}
                           for s in states],
            "front_door": door}


def run(args: argparse.Namespace) -> int:
    docker.require_engine()
    reports = [collect(args, t) for t in ([args.topology] if args.topology else TOPOLOGIES)]
    if args.json:
        print(json.dumps(reports if not args.topology else reports[0], indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    for report in reports:
        if not report["containers"]:
            console.print(f"{report['project']}: not running")
            continue
        table = Table(title=f"{report['project']} ({report['topology']}"
                            f"{', rehearsal' if report['rehearsal'] else ''})", title_justify="left")
        for column in ("service", "state", "health", "restarts", "published"):
            table.add_column(column)
        for c in report["containers"]:
            published = ", ".join(b for binds in c["ports"].values() for b in binds)
            table.add_row(c["service"], c["state"], c["health"] or "-", str(c["restarts"]), published or "-")
        console.print(table)
        door = report["front_door"]
        mark = "[green]serving[/]" if door["serving"] else "[red]not serving[/]"
        console.print(f"front door {door['url']}: {mark} ({door['detail']})")
    return 0
