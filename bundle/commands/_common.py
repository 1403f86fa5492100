"""Arguments and steps several verbs share: the config file, the topology, validate-then-render."""

from __future__ import annotations

import argparse

from bundle.rules.check import Findings, check
from bundle.config.loader import TOPOLOGIES, Deployment, find_config, load_config


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", metavar="FILE",
                        help="bundle.yaml to use (default: $BUNDLE_CONFIG, ./bundle.yaml, else the "
                             "embedded defaults for DeepSeek-V4-Flash on 8x RTX PRO 6000)")


def add_topology_argument(parser: argparse.ArgumentParser, *, optional: bool = False) -> None:
    if optional:
        parser.add_argument("topology", nargs="?", choices=TOPOLOGIES,
                            help="tp4 or pd (default: both)")
    else:
        parser.add_argument("topology", choices=TOPOLOGIES, help="tp4 or pd")


def load_checked(args: argparse.Namespace, topology: str, *, require_model: bool = False
                 ) -> tuple[Deployment, Findings]:
    """Schema then semantic rules; raises one ConfigError listing every problem, before anything runs."""
    dep = load_config(find_config(getattr(args, "config", None)))
    findings = check(dep, topology, require_model=require_model)
    findings.raise_if_errors(dep.source.name)
    return dep, findings

