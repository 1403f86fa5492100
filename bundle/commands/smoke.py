"""`bundle smoke [tp4|pd] [-c FILE] [--json]`: is the running topology right, not just up?

Exit 0 when every step passed, 1 (with the failed steps named) otherwise; the JSON report is
written under runs/<project>/<time>-smoke/smoke.json either way.
"""

from __future__ import annotations

import argparse
import json

from bundle.commands._common import add_config_argument
from bundle.config.loader import TOPOLOGIES

HELP = "smoke-test the running topology: health, model, answers, streaming, greedy repeatability, PD path"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topology", nargs="?", choices=TOPOLOGIES,
                        help="tp4 or pd (default: the one that is running)")
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from bundle.verify import report
    from bundle.stack import runstate
    from bundle.commands._target import WORKER_SERVICES, running_target
    from bundle.durations import parse_duration
    from bundle.errors import EXIT_FAILED, BundleError
    from bundle.stack.frontdoor import front_door
    from bundle.verify.smoke import smoke
    from bundle.stack.workers import ComposeWorkers

    dep, topology, record = running_target(args)
    front = front_door(dep)
    cfg = dep.raw["smoke"]
    workers = None
    if topology == "pd":
        workers = ComposeWorkers(record.stack(), WORKER_SERVICES["pd"], port=int(dep.network["worker_port"]))
    console = Console(highlight=False, soft_wrap=True, stderr=args.json)
    with console.status(f"smoke-testing {topology} at {front.url} ..."):
        result = smoke(front, topology=topology, checks=cfg["checks"], max_tokens=int(cfg["max_tokens"]),
                       request_timeout=parse_duration(cfg["request_timeout"], what="smoke.request_timeout"),
                       workers=workers)
    data = result.to_dict() | {"project": record.project, "rehearsal": record.rehearsal}
    path = report.write_json(runstate.new_run_dir(record.project, "smoke") / "smoke.json", data)
    if args.json:
        print(front.redact(json.dumps(data, indent=2)))
    else:
        console.print(report.smoke_table(data))
        console.print(f"report: {path}")
    if not result.ok:
        reasons = "; ".join(f"{s.name}: {s.detail}" for s in result.failures)
        raise BundleError(f"smoke test of {topology} failed: {reasons}",
                          hint=f"report: {path}; `bundle logs {topology}` for the servers' side",
                          exit_code=EXIT_FAILED)
    return 0
