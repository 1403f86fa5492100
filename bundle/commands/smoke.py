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
    from bundle.durations import parse_duration
    from bundle.errors import EXIT_FAILED, BundleError
    from bundle.stack import runstate
    from bundle.stack.frontdoor import front_door
    from bundle.stack.workers import ComposeWorkers
    from bundle.verify import report
    from bundle import topology as registry
    from bundle.verify.smoke import compare_answers, last_comparable_report, smoke

    target = one_running(args, verb="smoke-test")
    dep, topology = target.dep, target.topology
    front = front_door(dep, topology)
    workers = None
    if topology.has_router:  # the servers behind the router, read from inside their containers
        names = {role.name: role.name for role in dep.roles(topology)}
        workers = ComposeWorkers(target.stack(), names, port=dep.network.worker_port)
    console = report.console(stderr=args.json)
    with console.status(f"smoke-testing {topology.name} at {front.url} ..."):
        result = smoke(front, topology=topology.name, checks=dep.smoke.checks, max_tokens=dep.smoke.max_tokens,
                       request_timeout=parse_duration(dep.smoke.request_timeout, what="smoke.request_timeout"),
                       workers=workers)
    launch_env = target.launch.env
    identity = {"project": target.project, "rehearsal": target.launch.rehearsal, "model": front.model,
                "lock_hash": launch_env.get("BUNDLE_LOCK_HASH"), "image": launch_env.get("BUNDLE_IMAGE"),
                "max_tokens": dep.smoke.max_tokens}
    # Greedy answers must not depend on the topology: hold them against the last report of another.
    others = [runstate.project_dir(dep.project_name(name)) for name in registry.NAMES if name != topology.name]
    earlier, earlier_path = last_comparable_report(others, identity)
    compare_answers(result, earlier, where=earlier_path or "")
    data = result.to_dict() | identity
    path = report.write_json(runstate.new_run_dir(target.project, "smoke") / "smoke.json", data)
    if args.json:
        print(front.redact(json.dumps(data, indent=2)))
    else:
        console.print(report.smoke_table(data))
        console.print(f"report: {path}")
    if not result.ok:
        reasons = "; ".join(f"{s.name}: {s.detail}" for s in result.failures)
        raise BundleError(f"smoke test of {topology.name} failed: {reasons}",
                          hint=f"report: {path}; `bundle logs {topology.name}` for the servers' side",
                          exit_code=EXIT_FAILED)
    return 0
