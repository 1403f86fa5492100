"""`bundle validate [tp4|pd|dp] [-c FILE]`: schema, semantic rules and parser checks; starts nothing."""

from __future__ import annotations

import argparse
import sys

from bundle import topology as registry
from bundle.commands._common import add_config_argument, add_topology_argument, load
from bundle.service.prepare import prepare

HELP = "check bundle.yaml (or the embedded defaults) for a topology; starts nothing"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True)
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    # Plain print, not rich: validate must answer fast and prints a line or two.
    dep = load(args)
    for topology in [args.topology] if args.topology else list(registry.NAMES):
        prepared = prepare(topology, dep=dep)
        for warning in prepared.findings.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        print(f"ok {topology}: {dep.source.name} is valid (project {dep.project_name(topology)})")
    _print_predicted(dep, [args.topology] if args.topology else list(registry.NAMES))
    return 0


def _print_predicted(dep, topologies: list[str]) -> None:
    """What SGLang will pick on sm_120, from the last `bundle audit` of this lock's image with this
    config (running SGLang takes a minute; validate stays fast by reading the audit's record)."""
    from bundle.images.audit_record import latest_predicted
    from bundle.lock import load_lock

    found = latest_predicted(load_lock().hash, dep.source.name)
    if found is None:
        print("predicted: no `bundle audit` of this lock's image with this config yet (run it to see what "
              "SGLang will pick on sm_120)")
        return
    path, predicted = found
    for server, p in sorted(predicted.items()):
        if server.split("/")[0] in topologies:
            print(f"predicted {server}: attention {p['attention_backend']}, page {p['page_size']}, "
                  f"MoE {p['moe_runner_backend']}, sparse-MLA {p['sm120_sparse_mla_backend']}, "
                  f"KV {p['kv_cache_dtype']}, speculative {p['speculative_algorithm'] or 'none'} ({path.name})")
