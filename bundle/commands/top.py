"""`bundle top [tp4|pd|dp] [--interval SECONDS] [--watch] [--json]`: the live figures per server
(tok/s, TTFT, TPOT, queue, running, KV use, KV transfer speed), read from each server's /metrics
inside its container, twice, `--interval` apart: for a terminal or an SSH session, without Grafana. The
readings are the top service's (bundle/service/top.py); this file parses and prints."""

from __future__ import annotations

import argparse
import json

from bundle.commands._common import add_config_argument, add_topology_argument

HELP = "live figures per server from its metrics: tok/s, TTFT, TPOT, queue, KV use, KV transfer speed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True, default_help="the one that is up")
    add_config_argument(parser)
    parser.add_argument("--interval", type=float, default=3.0, metavar="SECONDS",
                        help="time between the two readings rates and means are taken over (default 3)")
    parser.add_argument("--watch", action="store_true", help="repeat until interrupted")
    parser.add_argument("--json", action="store_true", help="machine-readable output (one reading)")


def run(args: argparse.Namespace) -> int:
    from bundle.commands._common import find_request
    from bundle.service.finding import one_running
    from bundle.service.top import TopRequest, check_interval, readings

    check_interval(args.interval)  # before any project is looked for
    target = one_running(find_request(args), verb="top").launched()
    for reading in readings(TopRequest(target, args.interval)):
        if args.json:
            print(json.dumps([r.as_dict() for r in reading.rows], indent=2))
            return 0
        _print(reading.project, reading.rows, reading.seconds)
        if not args.watch:
            return 0
    return 0


def _cell(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _print(project: str, rows, seconds: float) -> None:
    from rich.table import Table

    from bundle.reporter import report_console

    table = Table(title=f"{project}: over the last {seconds:.1f} s", title_justify="left")
    for column in ("server", "tok/s", "TTFT ms", "TPOT ms", "queue", "running", "KV use", "KV GB/s"):
        table.add_column(column, justify="left" if column == "server" else "right")
    for r in rows:
        table.add_row(r.service, _cell(r.tokens_per_s, ".1f"), _cell(r.ttft_ms, ".0f"), _cell(r.tpot_ms, ".1f"),
                      _cell(r.queue, ".0f"), _cell(r.running, ".0f"), _cell(r.kv_use, ".0%"),
                      _cell(r.kv_transfer_gb_s, ".1f"))
    report_console().print(table)
