"""`bundle smoke [tp4|pd|dp] [-c FILE] [--json]`: is the running topology right, not just up?

Exit 0 when every step passed, 1 (with the failed steps named) otherwise; the JSON report is
written under runs/<project>/<time>-smoke/smoke.json either way.
"""

from __future__ import annotations

import argparse
import json

from bundle.commands._common import add_config_argument, add_topology_argument

HELP = "smoke-test the running topology: health, model, answers, streaming, greedy repeatability, PD path, replicas"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True, default_help="the one that is running")
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    from bundle.commands._common import find_request
    from bundle.errors import Failed
    from bundle.reporter import report_console
    from bundle.service.finding import one_running
    from bundle.service.smoke import SmokeRequest, smoke_launched
    from bundle.verify import tables

    request = SmokeRequest(one_running(find_request(args), verb="smoke-test").launched())
    topology = request.target.topology
    console = report_console(stderr=args.json)
    with console.status(f"smoke-testing {topology.name} at {request.front.url} ..."):
        reported = smoke_launched(request)
    result, front, path = reported.smoked.result, reported.smoked.front, reported.path
    if args.json:
        print(front.redact(json.dumps(reported.data, indent=2)))
    else:
        console.print(tables.smoke_table(reported.data))
        console.print(f"report: {path}")
    if not result.ok:
        raise Failed(f"smoke test of {topology.name} failed: {reported.smoked.reasons}",
                     hint=f"report: {path}; `bundle logs {topology.name}` for the servers' side")
    return 0
