"""`bundle validate [tp4|pd|dp] [-c FILE]`: schema, semantic rules and parser checks; starts nothing (the work:
bundle/service/validate.py)."""

from __future__ import annotations

import argparse
import sys

from bundle.commands._common import add_config_argument, add_topology_argument
from bundle.service.validate import ValidateRequest, validate

HELP = "check bundle.yaml (or the embedded defaults) for a topology; starts nothing"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True)
    add_config_argument(parser)


def run(args: argparse.Namespace) -> int:
    # Plain print, not rich: validate must answer fast and prints a line or two.
    validation = validate(ValidateRequest(args.topology, args.config))
    for one in validation.topologies():
        for warning in one.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        print(f"ok {one.topology}: {validation.source} is valid (project {one.project})")
    audit, predicted = validation.predicted()
    if audit is None:
        print("predicted: no `bundle audit` of this lock's image with this config yet (run it to see what "
              "SGLang will pick on sm_120)")
    for p in predicted:
        c = p.choices
        print(f"predicted {p.server}: attention {c['attention_backend']}, page {c['page_size']}, "
              f"MoE {c['moe_runner_backend']}, sparse-MLA {c['sm120_sparse_mla_backend']}, "
              f"KV {c['kv_cache_dtype']}, speculative {c['speculative_algorithm'] or 'none'} ({audit})")
    return 0
