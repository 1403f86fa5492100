"""`bundle launch tp4|pd|dp [-c FILE] [--rehearsal] [--timeout DURATION]`: validate, write the env,
`compose up`, wait for true readiness with progress, attest what runs, print the endpoint (the work:
bundle/service/launch.py)."""

from __future__ import annotations

import argparse

from bundle.commands._common import add_config_argument, add_rehearsal_arguments, add_topology_argument, sim_knobs
from bundle.rehearsal import registry as rehearsal
from bundle.targets import registry as targets
from bundle.service.launch import LaunchRequest
from bundle.reporter import report_console

HELP = "bring a topology up and wait until it truly serves (health, router, one generation); reconciles one that is up"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser)
    add_config_argument(parser)
    add_rehearsal_arguments(parser,
                            rehearsal_help="no GPU: engine = the real SGLang server on CPU with a small model "
                                           "made here, sim = worker simulators; the real router (docs/rehearsal.md)",
                            sim_help="rehearsal only: a worker simulator knob, e.g. SIM_TPOT_MS=20 or "
                                     "SIM_WRONG_ANSWERS=1 (bundle/rehearsal/simulator/knobs.py lists them); repeatable")
    parser.add_argument("--timeout", metavar="DURATION",
                        help="readiness limit, e.g. 45m (default: lifecycle.launch_timeout)")
    parser.add_argument("--monitoring", action="store_true",
                        help="also start Prometheus (alerts) and Grafana (dashboards), and on a GPU host NVIDIA's "
                             "DCGM exporter: the compose profile `monitoring` (docs/monitoring.md)")
    parser.add_argument("--target", choices=targets.LAUNCHABLE, default=targets.DEFAULT,
                        help="; ".join(f"{name}{' (default)' if name == targets.DEFAULT else ''}: "
                                       f"{targets.get(name).launch_help.format(flag=rehearsal.FLAG, word=rehearsal.WORD)}"
                                       for name in targets.LAUNCHABLE))
    parser.add_argument("--no-recreate", action="store_true",
                        help="on a project that is up: only start what is stopped or missing, never recreate a "
                             "container whose configuration changed (as `docker compose up --no-recreate`)")
    parser.add_argument("--keep-on-failure", action="store_true",
                        help="leave the containers running after a failed start, for debugging")


def run(args: argparse.Namespace) -> int:
    knobs = sim_knobs(args)  # also resolves args.rehearsal to None, "engine" or "sim"
    service = targets.get(args.target).launcher
    service.launch(LaunchRequest(topology=args.topology, config=args.config, mode=args.rehearsal, sim=knobs,
                         timeout=args.timeout, monitoring=args.monitoring, keep_on_failure=args.keep_on_failure,
                         target=args.target, no_recreate=args.no_recreate), reporter=report_console())
    return 0
