"""Which compose project a verb acts on: the topology's project under the config, as launched."""

from __future__ import annotations

import argparse

from bundle.stack import runstate
from bundle.config.loader import find_config, load_config
from bundle.errors import BundleError
from bundle.render.compose import render


def launched(args: argparse.Namespace, topology: str) -> runstate.LaunchRecord:
    """The record `bundle launch` left; without one, the stack the config would launch."""
    dep = load_config(find_config(getattr(args, "config", None)))
    project = dep.project_name(topology)
    try:
        return runstate.load(project)
    except BundleError:  # no record (runs/ wiped, or launched by plain compose): render it again
        rendered = render(dep, topology)
        return runstate.LaunchRecord(project=project, topology=topology,
                                     compose_files=[str(f) for f in rendered.compose_files],
                                     env_file=str(rendered.env_file), rehearsal=False,
                                     config=dep.source.name, started_at=0.0,
                                     run_dir=str(runstate.project_dir(project)))
