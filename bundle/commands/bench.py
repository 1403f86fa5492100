"""`bundle bench [tp4|pd|dp] [-c FILE] [--concurrency 1 8] [--input-len N] [--output-len N]
[--prompts-per-concurrency N] [--level-timeout DURATION] [--label TEXT]`

SGLang's bench_serving inside the image against the running topology's front door service, with the
original method by default (random 256 in / 256 out, C = 1 and 8, 4 x C prompts). Exit 0 when every
level measured without a failed request, 5 when a level ran out of time, 1 otherwise; the levels
measured are recorded in every case.
"""

from __future__ import annotations

import argparse

from bundle.commands._common import add_config_argument, add_topology_argument
from bundle.errors import EXIT_USAGE

HELP = "benchmark the running topology with SGLang's bench_serving; JSON line, table and plot under runs/"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_topology_argument(parser, optional=True, default_help="the one that is running")
    add_config_argument(parser)
    parser.add_argument("--concurrency", type=int, nargs="+", metavar="C",
                        help="concurrency levels, each its own run (default: bench.concurrency)")
    parser.add_argument("--input-len", type=int, metavar="N", help="random input length (default: bench.input_len)")
    parser.add_argument("--output-len", type=int, metavar="N",
                        help="random output length (default: bench.output_len)")
    parser.add_argument("--prompts-per-concurrency", type=int, metavar="N",
                        help="prompts per level = N x C (default: bench.prompts_per_concurrency)")
    parser.add_argument("--level-timeout", metavar="DURATION",
                        help="time limit of each level, e.g. 30m (default: bench.level_timeout)")
    parser.add_argument("--range-ratio", type=float, metavar="R",
                        help="bench_serving's --random-range-ratio (default: bench.range_ratio)")
    parser.add_argument("--label", help="a name for this run in the history, table and plot")
    parser.add_argument("--soak", metavar="DURATION",
                        help="soak mode: run at one concurrency (the highest configured, or --concurrency C) "
                             "for this long, e.g. 30m; reports errors and latency drift from the first "
                             "minute to the last")
    parser.add_argument("--gate", type=float, metavar="PCT",
                        help="regression gate: exit 1 when throughput, TPOT or TTFT is worse than the earlier "
                             "run (--against, default: the last of the same config and image) by more than PCT%%")
    parser.add_argument("--against", metavar="RUN",
                        help="the run id (runs/<project>/bench.jsonl, e.g. 20261201-083000-bench) the table and "
                             "--gate compare with (default: the previous run; the table names its label)")
    parser.add_argument("--json", action="store_true", help="print the run's JSON record on stdout")


PROGRESS_EVERY_S = 15.0


def run(args: argparse.Namespace) -> int:
    import json
    import time
    from dataclasses import asdict

    from bundle.service import bench as bench_service
    from bundle.verify import bench, comparable, runstore, tables
    from bundle.verify.console import report_console
    from bundle.verify.plot import plot_bench
    from bundle.stack import runstate
    from bundle.commands._target import one_running
    from bundle.errors import EXIT_FAILED, EXIT_TIMEOUT, BundleError
    from bundle.stack.frontdoor import front_door

    target = one_running(args, verb="benchmark")
    dep, topology, record = target.dep, target.topology, target.launch
    for value, name in ((args.input_len, "--input-len"), (args.output_len, "--output-len"),
                        (args.prompts_per_concurrency, "--prompts-per-concurrency")):
        if value is not None and value < 1:
            raise BundleError(f"{name} must be at least 1", exit_code=EXIT_USAGE)
    if args.concurrency and min(args.concurrency) < 1:
        raise BundleError("--concurrency levels must be at least 1", exit_code=EXIT_USAGE)
    if args.gate is not None and (args.gate < 0 or args.soak):
        raise BundleError("--gate takes a percentage >= 0 and gates a benchmark, not a soak", exit_code=EXIT_USAGE)
    if args.soak:
        return _soak(args, target)
    env = record.env
    plan = bench.plan(dep, topology, env, concurrency=args.concurrency, input_len=args.input_len,
                      output_len=args.output_len, prompts_per_concurrency=args.prompts_per_concurrency,
                      level_timeout=args.level_timeout, range_ratio=args.range_ratio, label=args.label)
    front = front_door(dep, topology)
    console = report_console(stderr=args.json)
    history = runstore.read_jsonl(runstate.project_dir(record.project) / runstore.BENCH_HISTORY)
    against, compared_as = None, "previous run"
    if args.against:  # e.g. the defaults' run that `bundle tune` names in bundle.tuned.yaml
        from bundle.verify.bench import gate_reference

        against, compared_as = gate_reference(history, {"run_id": None}, args.against), "run"
        if against is None:
            raise BundleError(f"--against {args.against!r}: no such run in "
                              f"{runstate.project_dir(record.project) / runstore.BENCH_HISTORY} (or it names more "
                              f"than one)", hint="name a run_id of that file", exit_code=EXIT_USAGE)
    console.print(f"bench {topology.name}: bench_serving in the image against {plan.base_url}; "
                  f"dataset: {plan.dataset_source}")

    with console.status("starting ...") as status:
        printed = {"at": 0.0, "line": ""}

        def on_level(level):
            n = plan.levels.index(level) + 1
            status.update(f"level {n} of {len(plan.levels)}: C={level.concurrency}: {level.num_prompts} prompts, "
                          f"limit {level.timeout_s:.0f} s ...")
            console.print(f"level {n} of {len(plan.levels)}: C={level.concurrency}: {level.num_prompts} prompts "
                          f"({level.input_len} in / {level.output_len} out), limit {level.timeout_s:.0f} s")
            printed.update(at=time.monotonic(), line="")

        def on_progress(progress):
            # A terminal shows it live in the status line; a log gets a line when it changed, at
            # most every PROGRESS_EVERY_S seconds (a long level never looks hung, a log stays short).
            line = progress.line()
            if console.is_terminal:
                status.update(line)
            elif line.split(" (")[0] != printed["line"] and time.monotonic() - printed["at"] >= PROGRESS_EVERY_S:
                console.print(line, markup=False)
                printed.update(at=time.monotonic(), line=line.split(" (")[0])
        result, run_dir = bench_service.run_bench(dep, topology, record, plan, on_level=on_level,
                                                  on_progress=on_progress)
    baseline = asdict(dep.bench.baseline) if dep.bench.baseline else None
    # Only like with like in percent (bundle/verify/comparable.py): the named run is shown even when
    # it is unlike (its row says why there is no comparison); otherwise the latest run like this one.
    previous = against or runstore.previous_bench(history, result)
    unlike_previous = None if previous else comparable.latest_unlike(history, result)
    plot = plot_bench(result, run_dir / "bench.png", baseline=baseline, previous=previous)
    if args.json:
        print(front.redact(json.dumps(result, indent=2)))
    else:
        console.print(tables.bench_table(result))
        comparison = tables.comparison_table(result, baseline, previous, previous_name=compared_as,
                                             unlike_previous=unlike_previous)
        console.print(comparison if comparison is not None else
                      "nothing to compare with: no C=1 level for the baseline, no previous run")
    console.print(f"recorded: {runstate.project_dir(record.project) / runstore.BENCH_HISTORY} "
                  f"(run {result['run_id']}); details: {run_dir}"
                  + (f"; plot: {plot}" if plot else "; no plot (pip install '.[plot]' for matplotlib)"))
    gated = _gate(args, history, result, run_dir, console) if args.gate is not None else None
    bad = [lv for lv in result["levels"] if lv["status"] != "ok"]
    if bad:
        reasons = "; ".join(f"C={lv['concurrency']} {lv['status']}: {lv['reason']}" for lv in bad)
        code = EXIT_TIMEOUT if any(lv["status"] == "timeout" for lv in bad) else EXIT_FAILED
        raise BundleError(f"bench {topology.name}: {len(bad)} of {len(result['levels'])} levels did not "
                          f"complete cleanly (measured levels are recorded): {reasons}", exit_code=code)
    if gated is not None and not gated["ok"]:
        what = "; ".join(gated["regressions"]) or "no level was measured in both runs"
        raise BundleError(f"bench {topology.name}: regression gate ({args.gate:g}%) against run "
                          f"{gated['against']} failed: {what}", exit_code=EXIT_FAILED)
    return 0


def _gate(args, history, result, run_dir, console) -> dict:
    """The gate's verdict (also written to the run's gate.json); no earlier run to compare with is
    an error, never a silent pass."""
    from bundle.errors import EXIT_FAILED, BundleError
    from bundle.verify import bench, comparable, runstore, tables

    reference = bench.gate_reference(history, result, args.against)
    if reference is None:
        wanted = (f"run {args.against!r} is not in the history (or names more than one)" if args.against else
                  "no earlier run of this topology with the same config and image")
        raise BundleError(f"bench --gate: {wanted}; nothing to gate against (this run is recorded: "
                          f"{result['run_id']})", hint="run once without --gate to record a reference, or "
                          "name one with --against RUN", exit_code=EXIT_FAILED)
    if reason := comparable.unlike(result, reference):
        raise BundleError(f"bench --gate against run {reference.get('run_id')}: no comparison: {reason} "
                          f"(this run is recorded: {result['run_id']})",
                          hint="gate against a run of the same topology, GPU or rehearsal mode, target and "
                               "lengths (--against RUN), or run once without --gate to record one",
                          exit_code=EXIT_FAILED)
    gated = bench.gate(result, reference, args.gate)
    runstore.write_json(run_dir / "gate.json", gated)
    for line in tables.gate_lines(gated):
        console.print(line, markup=False)
    return gated


def _soak(args, target) -> int:
    """`--soak DURATION`: one concurrency for a fixed time; exit 1 on any error."""
    from bundle.durations import parse_duration
    from bundle.errors import EXIT_FAILED, BundleError
    from bundle.service import bench as bench_service
    from bundle.stack.frontdoor import front_door
    from bundle.verify import bench, tables
    from bundle.verify.console import report_console

    dep, topology, record = target.dep, target.topology, target.launch
    duration = parse_duration(args.soak, what="--soak")
    concurrency = args.concurrency or [max(dep.bench.concurrency)]
    if len(concurrency) != 1:
        raise BundleError("--soak runs one concurrency: give --concurrency one level", exit_code=EXIT_USAGE)
    plan = bench.plan(dep, topology, record.env, concurrency=concurrency, input_len=args.input_len,
                      output_len=args.output_len, prompts_per_concurrency=args.prompts_per_concurrency,
                      level_timeout=args.soak, range_ratio=args.range_ratio, label=args.label)
    front = front_door(dep, topology)
    console = report_console(stderr=args.json)
    console.print(f"soak {topology.name}: C={concurrency[0]} for {duration:.0f} s against {plan.base_url}")
    result, run_dir = bench_service.run_soak(
        dep, topology, record, plan, duration_s=duration,
        on_round=lambda n, left: console.print(f"round {n}: {left:.0f} s left"))
    if args.json:
        import json

        print(front.redact(json.dumps(result, indent=2)))
    else:
        console.print(tables.soak_table(result))
    console.print(f"recorded: {runstate_path(record.project)} (run {result['run_id']}); details: {run_dir}")
    if not result["ok"]:
        s = result["soak"]
        why = s["stopped"] or (f"{s['failed']} of {s['completed'] + s['failed']} requests failed: "
                               f"{'; '.join(s['error_samples']) or 'no error text'}" if s["failed"]
                               else "no request completed")
        raise BundleError(f"soak {topology.name} failed: {why}", exit_code=EXIT_FAILED)
    return 0


def runstate_path(project: str):
    from bundle.stack import runstate
    from bundle.verify import runstore

    return runstate.project_dir(project) / runstore.BENCH_HISTORY
