"""`bundle tune tp4|pd|dp [-c FILE] [--space FILE] [--objective throughput|tpot] [--max-tpot MS]
[--max-ttft MS] [--budget DURATION] [--rehearsal [--sim KNOB=VALUE]] [-o FILE]`

Launches each candidate (the config with one set of overrides), attests, smoke-tests and
benchmarks it, takes it down, and keeps the winner as bundle.tuned.yaml. Every candidate is
validated before the first launch; each result is stored as it finishes (runs/<project>/tune/
results.jsonl) and a rerun resumes without repeating finished candidates. Exit 0 with a winner,
1 when no candidate qualified, 3 for a bad config or space file, 130/143 when interrupted (nothing
is left running).
"""

from __future__ import annotations

import argparse

from bundle.commands._common import (add_config_argument, add_rehearsal_arguments, add_topology_argument,
                                     resolve_rehearsal, sim_knobs)
from bundle.service import rehearsal

HELP = "sweep the levers on this box (launch, attest, smoke, bench, down each); keep the winner as bundle.tuned.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser)
    add_config_argument(parser)
    parser.add_argument("--space", metavar="FILE",
                        help="search-space YAML (bundle/tune/space.schema.json): levers and values, explicit "
                             "candidates, the bench method, objective, budget (default: the named levers)")
    parser.add_argument("--objective", choices=["throughput", "tpot"],
                        help="throughput: the highest output tok/s of any level within --max-tpot/--max-ttft "
                             "(default); tpot: the lowest mean TPOT at C=1")
    parser.add_argument("--max-tpot", type=float, metavar="MS", help="throughput objective: mean TPOT bound")
    parser.add_argument("--max-ttft", type=float, metavar="MS", help="throughput objective: mean TTFT bound")
    parser.add_argument("--budget", metavar="DURATION",
                        help="stop before the estimated sweep exceeds this, e.g. 2h (default: no limit)")
    parser.add_argument("--launch-timeout", metavar="DURATION",
                        help="each candidate's readiness limit (default: lifecycle.launch_timeout)")
    add_rehearsal_arguments(parser,
                            rehearsal_help="simulated workers behind the real router, no GPU (speeds are SIMULATED)",
                            sim_help="rehearsal only: a worker simulator knob for every candidate, e.g. "
                                     "SIM_SPEED_RULES=speculative_algorithm=EAGLE:tpot*0.5 (bundle/simulator/speed.py)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="where the winner goes (default: bundle.tuned.yaml beside the config, else here)")
    parser.add_argument("--dry-run", action="store_true",
                        help="validate every candidate, print the plan and its estimate; start nothing")


def run(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from bundle.config.loader import find_config, load_config
    from bundle.config.source import read_yaml
    from bundle.durations import parse_duration
    from bundle.errors import EXIT_ENVIRONMENT, EXIT_FAILED, EXIT_USAGE, BundleError
    from bundle.lock import load_lock
    from bundle.stack import docker, engine, runstate
    from bundle.tune import plan as planner
    from bundle.tune import report as tune_report
    from bundle.tune import results, runner
    from bundle.tune.space import load_space, objective_of
    from bundle.verify import runstore
    from bundle.verify.console import report_console

    console = report_console()
    # `bundle tune` stays on the simulator: its SIM_SPEED_RULES give each candidate a speed.
    mode = resolve_rehearsal(args, tuning=True)
    if mode is not None and not mode.tunable:
        tunable = [m.name for m in rehearsal.MODES.values() if m.tunable]
        raise BundleError(f"bundle tune rehearses on the worker simulator only (its speed rules rank the "
                          f"candidates); the {mode.summary}'s speed says nothing about a GPU host",
                          exit_code=EXIT_USAGE, hint=f"use --rehearsal (or --rehearsal {' or '.join(tunable)})")
    knobs = sim_knobs(args)
    # 1. Everything that can be refused before anything starts: the config, the space, every candidate.
    config_path = find_config(args.config)
    load_config(config_path)  # the user's file on its own: its own errors, with its own lines
    user = read_yaml(config_path) if config_path else None
    space = load_space(args.space)
    objective = objective_of(space, metric=args.objective, max_tpot_ms=args.max_tpot, max_ttft_ms=args.max_ttft)
    budget_text = args.budget or space.budget
    budget_s = parse_duration(budget_text, what="--budget") if budget_text else None
    if args.launch_timeout:
        parse_duration(args.launch_timeout, what="--launch-timeout")
    from bundle.config.source import DEFAULTS_NAME, Source

    lock = load_lock()
    plan = planner.make_plan(space, user or Source(DEFAULTS_NAME, {}), topology=args.topology,
                             rehearsal=args.rehearsal, sim=knobs, budget_s=budget_s, lock_hash=lock.hash)
    if objective.metric == "tpot" and 1 not in plan.base["bench"]["concurrency"]:
        raise BundleError(f"--objective tpot ranks by the C=1 level, but the bench method's concurrency is "
                          f"{plan.base['bench']['concurrency']}", exit_code=EXIT_USAGE,
                          hint="add 1 to bench.concurrency (in the config or the space file's bench:)")
    _print_plan(plan, console, objective, budget_s)
    if args.dry_run:
        return 0
    if not plan.to_run and not any(p.previous for p in plan.items):
        raise BundleError("no candidate can run: every one was skipped (reasons above)", exit_code=EXIT_FAILED)
    engine.require_engine()
    engine.require_compose()
    if docker.project_containers(plan.project):
        raise BundleError(f"{plan.project} is up: bundle tune launches each candidate itself",
                          hint=f"`bundle down {args.topology}` first (the JIT cache volume is kept)",
                          exit_code=EXIT_ENVIRONMENT)
    if mode is not None:
        mode.ensure_artifacts(report=print)
    # 2. The sweep. A signal ends it here, the candidate's stack already down.
    started = time.monotonic()
    sweep_dir = runstate.new_run_dir(plan.project, "tune")
    interrupted = None
    try:
        sweep = runner.Sweep(config=args.config, rehearsal=args.rehearsal, sim=knobs,
                             launch_timeout=args.launch_timeout)
        runner.run_sweep(plan, sweep, console, started=started)
    except KeyboardInterrupt as exc:
        interrupted = exc
    # 3. Every candidate, ranked (this run's, the resumed ones, the skipped ones).
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
    ranked = results.rank(records, objective)
    reference = next((r for r in ranked if not r.get("overrides") and r.get("status") == "ok"), None)
    console.print(tune_report.ranked_table(ranked, objective, rehearsal=args.rehearsal, reference=reference))
    png = tune_report.plot(ranked, sweep_dir / "tune.png", rehearsal=args.rehearsal, topology=args.topology,
                           objective=objective)
    winner = ranked[0] if ranked and ranked[0].get("score") is not None else None
    tuned_path = None
    if winner and not interrupted:
        tuned_path = Path(args.output) if args.output else (
            (config_path.parent if config_path else Path.cwd()) / "bundle.tuned.yaml")
        tuned_path.write_text(tune_report.tuned_config(
            user, winner, reference, topology=args.topology, objective=objective, rehearsal=args.rehearsal,
            sweep_dir=sweep_dir, space_name=space.name, project=plan.project))
    runstore.write_json(sweep_dir / "sweep.json", tune_report.sweep_record(
        plan, ranked, objective=objective, interrupted=interrupted is not None, winner=winner,
        tuned=str(tuned_path) if tuned_path else None))
    console.print(f"results: {results.results_path(plan.project)}; sweep: {sweep_dir / 'sweep.json'}"
                  + (f"; plot: {png}" if png else "; no plot (pip install '.[plot]' for matplotlib)"))
    if interrupted is not None:
        console.print("the sweep was interrupted; nothing is running. Run the same command again to resume "
                      "(finished candidates are not repeated).")
        raise interrupted
    if winner is None:
        raise BundleError("no candidate qualified for the objective (see the table)", exit_code=EXIT_FAILED)
    console.print(f"winner: [bold]{winner['name']}[/] -> {tuned_path} "
                  f"(`bundle validate {args.topology} -c {tuned_path}`, then `bundle launch {args.topology} "
                  f"-c {tuned_path}`)")
    return 0


def _print_plan(plan, console, objective, budget_s) -> None:
    from rich.markup import escape

    console.print(f"tune {plan.topology} ({plan.project}): {objective.describe()}; "
                  f"{len(plan.items)} candidates, least disruptive first")
    for note in plan.notes:
        console.print(f"  note: {note}", markup=False)
    for item in plan.items:
        cand = item.candidate
        what = ", ".join(cand.changes) or "the config as it is"
        if cand.skip:
            state = f"[yellow]skip[/]: {escape(cand.skip)}"
        elif item.previous:
            state = f"[cyan]done[/] ({item.previous.get('status')}, resumed: not run again)"
        else:
            state = f"about {item.estimate_s / 60:.1f} min"
        console.print(f"  - {escape(cand.name)} ({escape(what)}): {state}")
    total = plan.total_s
    console.print(f"estimate: {len(plan.to_run)} to run, about {total / 60:.1f} min "
                  f"({plan.estimate.per_candidate_s:.0f} s each: launch {plan.estimate.launch_s:.0f}, smoke "
                  f"{plan.estimate.smoke_s:.0f}, bench {plan.estimate.bench_s:.0f}, down {plan.estimate.down_s:.0f}; "
                  f"{plan.estimate.source})" + (f"; budget {budget_s / 60:.1f} min" if budget_s else ""),
                  markup=False)
