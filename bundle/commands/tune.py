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
                                     "SIM_SPEED_RULES=speculative_algorithm=EAGLE:tpot*0.5 (bundle/rehearsal/simulator/speed.py)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="where the winner goes (default: bundle.tuned.yaml beside the config, else here)")
    parser.add_argument("--dry-run", action="store_true",
                        help="validate every candidate, print the plan and its estimate; start nothing")


def run(args: argparse.Namespace) -> int:
    from bundle.errors import Failed
    from bundle.tune import report as tune_report
    from bundle.tune import service
    from bundle.reporter import report_console

    console = report_console()
    # `bundle tune` stays on the simulator: its SIM_SPEED_RULES give each candidate a speed.
    mode = resolve_rehearsal(args, tuning=True)
    service.require_tunable(mode)  # before the --sim knobs: the mode is the first thing wrong
    request = service.TuneRequest(
        topology=args.topology, config=args.config, space=args.space, objective=args.objective,
        max_tpot_ms=args.max_tpot, max_ttft_ms=args.max_ttft, budget=args.budget,
        launch_timeout=args.launch_timeout, mode=mode, sim=sim_knobs(args), output=args.output)
    planned = service.plan_sweep(request)
    _print_plan(planned.plan, console, planned.objective, planned.budget_s)
    if args.dry_run:
        return 0
    tuned = service.sweep(planned, console)
    console.print(tune_report.ranked_table(tuned.ranked, planned.objective, mode=mode,
                                           reference=tuned.reference))
    console.print(f"results: {tuned.results_path}; sweep: {tuned.sweep_dir / 'sweep.json'}"
                  + (f"; plot: {tuned.plot}" if tuned.plot else "; no plot (pip install '.[plot]' for matplotlib)"))
    if tuned.interrupted is not None:
        console.print("the sweep was interrupted; nothing is running. Run the same command again to resume "
                      "(finished candidates are not repeated).")
        raise tuned.interrupted
    if tuned.winner is None:
        raise Failed("no candidate qualified for the objective (see the table)")
    console.print(f"winner: [bold]{tuned.winner['name']}[/] -> {tuned.tuned_path} "
                  f"(`bundle validate {args.topology} -c {tuned.tuned_path}`, then `bundle launch {args.topology} "
                  f"-c {tuned.tuned_path}`)")
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
