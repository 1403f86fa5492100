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
    from bundle.commands._target import one_running
    from bundle.errors import Failed
    from bundle.service.smoke import run_smoke
    from bundle.stack import runstate
    from bundle.stack.frontdoor import front_door
    from bundle.verify import tables
    from bundle.reporter import report_console
    from bundle import topology as registry
    from bundle.verify.smoke import compare_answers, last_comparable_report

    target = one_running(args.topology, args.config, verb="smoke-test")
    dep, topology = target.dep, target.topology
    console = report_console(stderr=args.json)
    with console.status(f"smoke-testing {topology.name} at {front_door(dep, topology).url} ..."):
        smoked = run_smoke(dep, topology, target.launch, target.stack())
    result, front = smoked.result, smoked.front
    # Greedy answers must not depend on the topology: hold them against the last report of another.
    others = [runstate.project_dir(dep.project_name(t.name)) for t in registry.TOPOLOGIES.values() if t != topology]
    earlier, earlier_path = last_comparable_report(others, smoked.identity)
    compare_answers(result, earlier, where=earlier_path or "")
    data = result.to_dict() | smoked.identity
    path = smoked.write(target.project)
    if args.json:
        print(front.redact(json.dumps(data, indent=2)))
    else:
        console.print(tables.smoke_table(data))
        console.print(f"report: {path}")
    if not result.ok:
        reasons = smoked.reasons
        raise Failed(f"smoke test of {topology.name} failed: {reasons}",
                     hint=f"report: {path}; `bundle logs {topology.name}` for the servers' side")
    return 0
