"""`bundle tune` as a service: TuneRequest in, a checked plan (TunePlan) out of plan_sweep(), the
sweep and its ranking (Tuned) out of sweep(). The verb (commands/tune.py) parses its flags into the
request, prints the plan and the ranking, and maps Tuned to its exit code.

It lives in the tune stage, not in bundle/service/: it runs candidates through the launch, smoke and
bench services, so it sits above them (tests/test_import_graph.py's layers)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from bundle.config.loader import find_config, load_config
from bundle.config.source import DEFAULTS_NAME, Source, read_yaml
from bundle.durations import parse_duration
from bundle.errors import EnvironmentProblem, Failed, UsageError
from bundle.lock import load_lock
from bundle import modes
from bundle.api import Mode
from bundle.stack import docker, engine, runstate
from bundle.tune import plan as planner
from bundle.tune import report as tune_report
from bundle.tune import results, runner
from bundle.tune.space import Objective, Space, load_space, objective_of
from bundle.verify import runstore
from bundle.reporter import Reporter, plain


@dataclass(frozen=True)
class TuneRequest:
    topology: str  # a registry name
    config: str | None = None  # bundle.yaml's path; None: $BUNDLE_CONFIG, ./bundle.yaml or the defaults
    space: str | None = None  # the search-space YAML; None: the named levers
    objective: str | None = None  # throughput | tpot; None: the space's, else throughput
    max_tpot_ms: float | None = None
    max_ttft_ms: float | None = None
    budget: str | None = None  # a duration; None: the space's budget, else no limit
    launch_timeout: str | None = None  # each candidate's readiness limit; None: lifecycle.launch_timeout
    mode: Mode | None = None  # None on a GPU host, else a tunable mode
    sim: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # the simulator's knobs
    output: str | None = None  # the winner's file; None: bundle.tuned.yaml beside the config, else here


@dataclass(frozen=True)
class TunePlan:
    """Everything refused before anything starts has been: the config, the space, every candidate."""

    request: TuneRequest
    plan: planner.Plan
    objective: Objective
    budget_s: float | None
    config_path: Path | None
    user: Source | None  # the user's own file, which the winner's file is written over
    space: Space


@dataclass(frozen=True)
class Tuned:
    """A sweep's outcome: every candidate ranked (this run's, the resumed ones, the skipped ones)."""

    ranked: list[dict]
    reference: dict | None  # the config as it is, when it ran: what the table compares with
    winner: dict | None  # the best candidate with a score, else None (none qualified)
    tuned_path: Path | None  # where the winner was written; None without a winner or when interrupted
    sweep_dir: Path
    results_path: Path
    plot: Path | None  # None without matplotlib
    interrupted: KeyboardInterrupt | None  # the signal that ended the sweep (nothing is left running)


def require_tunable(mode: Mode | None) -> None:
    """A mode whose speed ranks nothing (the CPU engine's) is refused: a usage error."""
    if mode is not None and not mode.tunable:
        tunable = [m.name for m in modes.registry().MODES.values() if m.tunable]
        flag = modes.flag()
        raise UsageError(f"bundle tune runs without a GPU on the worker simulator only (its speed rules rank the "
                         f"candidates); the {mode.summary}'s speed says nothing about a GPU host",
                         hint=f"use {flag} (or {flag} {' or '.join(tunable)})")


def plan_sweep(request: TuneRequest) -> TunePlan:
    """Every candidate validated and estimated; starts nothing. Raises BundleError (exit 2 or 3) for a
    mode that cannot rank candidates, a bad config, space or budget."""
    require_tunable(request.mode)
    config_path = find_config(request.config)
    load_config(config_path)  # the user's file on its own: its own errors, with its own lines
    user = read_yaml(config_path) if config_path else None
    space = load_space(request.space)
    objective = objective_of(space, metric=request.objective, max_tpot_ms=request.max_tpot_ms,
                             max_ttft_ms=request.max_ttft_ms)
    budget_text = request.budget or space.budget
    budget_s = parse_duration(budget_text, what="--budget") if budget_text else None
    if request.launch_timeout:
        parse_duration(request.launch_timeout, what="--launch-timeout")
    plan = planner.make_plan(space, user or Source(DEFAULTS_NAME, {}), topology=request.topology,
                             mode=request.mode, sim=dict(request.sim), budget_s=budget_s,
                             lock_hash=load_lock().hash)
    if objective.metric == "tpot" and 1 not in plan.base["bench"]["concurrency"]:
        raise UsageError(f"--objective tpot ranks by the C=1 level, but the bench method's concurrency is "
                         f"{plan.base['bench']['concurrency']}",
                         hint="add 1 to bench.concurrency (in the config or the space file's bench:)")
    return TunePlan(request, plan, objective, budget_s, config_path, user, space)


def sweep(planned: TunePlan, reporter: Reporter) -> Tuned:
    """Launch, smoke, bench and down each candidate still to run, rank them all, write the winner's
    file (unless interrupted), sweep.json and the plot. A signal ends the sweep with nothing running
    and comes back in Tuned.interrupted. Raises BundleError when no candidate can run or the project
    is already up."""
    request, plan, objective = planned.request, planned.plan, planned.objective
    if not plan.to_run and not any(p.previous for p in plan.items):
        raise Failed("no candidate can run: every one was skipped (reasons above)")
    engine.require_engine()
    engine.require_compose()
    if docker.project_containers(plan.project):
        raise EnvironmentProblem(f"{plan.project} is up: bundle tune launches each candidate itself",
                                 hint=f"`bundle down {request.topology}` first (the JIT cache volume is kept)")
    if request.mode is not None:
        request.mode.ensure_artifacts(report=plain(reporter))
    started = time.monotonic()
    sweep_dir = runstate.new_run_dir(plan.project, "tune")
    interrupted = None
    try:
        runner.run_sweep(plan, runner.Sweep(config=request.config, mode=request.mode,
                                            sim=dict(request.sim), launch_timeout=request.launch_timeout),
                         reporter, started=started)
    except KeyboardInterrupt as exc:  # the candidate's stack is already down
        interrupted = exc
    ranked = results.rank(_records(plan, interrupted is not None), objective)
    reference = next((r for r in ranked if not r.get("overrides") and r.get("status") == "ok"), None)
    png = tune_report.plot(ranked, sweep_dir / "tune.png", mode=request.mode,
                           topology=request.topology, objective=objective)
    winner = ranked[0] if ranked and ranked[0].get("score") is not None else None
    tuned_path = None
    if winner and not interrupted:
        tuned_path = Path(request.output) if request.output else (
            (planned.config_path.parent if planned.config_path else Path.cwd()) / "bundle.tuned.yaml")
        tuned_path.write_text(tune_report.tuned_config(
            planned.user, winner, reference, topology=request.topology, objective=objective,
            mode=request.mode, sweep_dir=sweep_dir, space_name=planned.space.name, project=plan.project))
    runstore.write_json(sweep_dir / "sweep.json", tune_report.sweep_record(
        plan, ranked, objective=objective, interrupted=interrupted is not None, winner=winner,
        tuned=str(tuned_path) if tuned_path else None))
    return Tuned(ranked, reference, winner, tuned_path, sweep_dir, results.results_path(plan.project), png,
                 interrupted)


def _records(plan: planner.Plan, interrupted: bool) -> list[dict]:
    """Every candidate's results line: its finished one (this run's or a resumed one), else why it did not run."""
    finished = results.finished(plan.project)
    records = []
    for item in plan.items:
        line = finished.get(item.candidate.key)
        if line is not None:
            records.append(dict(line, resumed=item.previous is not None))
        else:
            records.append({"name": item.candidate.name, "changes": list(item.candidate.changes),
                            "overrides": item.candidate.overrides, "key": item.candidate.key,
                            "status": "skipped" if item.candidate.skip else "not run",
                            "reason": item.candidate.skip or ("interrupted" if interrupted else None),
                            "levels": []})
    return records
