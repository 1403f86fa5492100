"""bench_serving against a launched topology, as `bundle bench` and `bundle tune` run it: the plan's
levels (or a soak) through the front door, stopped early when the stack goes away."""

from __future__ import annotations

from collections.abc import Callable

from bundle.config.model import Deployment
from bundle.errors import BundleError
from bundle.stack import runstate
from bundle.stack.frontdoor import front_door
from bundle.topology import Topology
from bundle.verify import bench
from bundle.service.targets import stack_of


def stack_gone(stack, front_service: str) -> str | None:
    """Why the topology is no longer there to benchmark (`bundle down` mid-run), or None."""
    try:
        states = {s.service: s.state for s in stack.states()}
    except BundleError:
        return "its containers can no longer be listed"
    if front_service not in states:
        return f"{front_service} was removed (`bundle down`?)"
    if states[front_service] != "running":
        return f"{front_service} is {states[front_service]}"
    return None


def run_bench(dep: Deployment, topology: Topology, record: runstate.LaunchRecord, plan: bench.BenchPlan, *,
              on_level: Callable | None = None, on_progress: Callable | None = None):
    """Every level of `plan` against what `record` launched; returns (the run's record, its folder)."""
    stack = stack_of(record)
    return bench.run(stack, plan, project=record.project, rehearsal=record.rehearsal, env=record.env,
                     target=record.target, api_key_file=dep.api_key_file, redact=front_door(dep, topology).redact,
                     on_level=on_level, on_progress=on_progress,
                     stack_gone=lambda: stack_gone(stack, topology.front_service))


def run_soak(dep: Deployment, topology: Topology, record: runstate.LaunchRecord, plan: bench.BenchPlan, *,
             duration_s: float, on_round: Callable | None = None):
    """One concurrency for `duration_s` against what `record` launched; returns (its record, its folder)."""
    stack = stack_of(record)
    return bench.run_soak(stack, plan, duration_s=duration_s, project=record.project, rehearsal=record.rehearsal,
                          env=record.env, api_key_file=dep.api_key_file, redact=front_door(dep, topology).redact,
                          on_round=on_round, stack_gone=lambda: stack_gone(stack, topology.front_service))
