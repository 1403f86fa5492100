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
    parser.add_argument("--json", action="store_true", help="print the run's JSON record on stdout")


def run(args: argparse.Namespace) -> int:
    import json
    from dataclasses import asdict

    from bundle.verify import bench
    from bundle.verify import report
    from bundle.stack import runstate
    from bundle.commands._target import one_running
    from bundle.errors import EXIT_FAILED, EXIT_TIMEOUT, BundleError
    from bundle.stack.frontdoor import front_door

    target = one_running(args, verb="benchmark")
    dep, topology, record = target.dep, target.topology, target.launch
    for value, name in ((args.input_len, "--input-len"), (args.output_len, "--output-len"),
                        (args.prompts_per_concurrency, "--prompts-per-concurrency")):
        if value is not None and value < 1:
            raise BundleError(f"{name} must be at least 1", exit_code=2)
    if args.concurrency and min(args.concurrency) < 1:
        raise BundleError("--concurrency levels must be at least 1", exit_code=2)
    env = record.env
    plan = bench.plan(dep, topology, env, concurrency=args.concurrency, input_len=args.input_len,
                      output_len=args.output_len, prompts_per_concurrency=args.prompts_per_concurrency,
                      level_timeout=args.level_timeout, range_ratio=args.range_ratio, label=args.label)
    front = front_door(dep, topology)
    console = report.console(stderr=args.json)
    history = report.read_jsonl(runstate.project_dir(record.project) / report.BENCH_HISTORY)
    previous = report.previous_bench(history, topology=topology.name)
    console.print(f"bench {topology.name}: bench_serving in the image against {plan.base_url}; "
                  f"dataset: {plan.dataset_source}")

    with console.status("starting ...") as status:
        def on_level(level):
            status.update(f"C={level.concurrency}: {level.num_prompts} prompts, "
                          f"limit {level.timeout_s:.0f} s ...")
            console.print(f"C={level.concurrency}: {level.num_prompts} prompts "
                          f"({level.input_len} in / {level.output_len} out), limit {level.timeout_s:.0f} s")
        stack = record.stack()
        result, run_dir = bench.run(stack, plan, project=record.project, rehearsal=record.rehearsal,
                                    env=env, api_key_file=dep.api_key_file, redact=front.redact,
                                    on_level=on_level, stack_gone=lambda: _gone(stack, topology.front_service))
    baseline = asdict(dep.bench.baseline) if dep.bench.baseline else None
    plot = report.plot_bench(result, run_dir / "bench.png", baseline=baseline, previous=previous)
    if args.json:
        print(front.redact(json.dumps(result, indent=2)))
    else:
        console.print(report.bench_table(result))
        comparison = report.comparison_table(result, baseline, previous)
        console.print(comparison if comparison is not None else
                      "nothing to compare with: no C=1 level for the baseline, no previous run")
    console.print(f"recorded: {runstate.project_dir(record.project) / report.BENCH_HISTORY} "
                  f"(run {result['run_id']}); details: {run_dir}"
                  + (f"; plot: {plot}" if plot else "; no plot (pip install '.[plot]' for matplotlib)"))
    bad = [lv for lv in result["levels"] if lv["status"] != "ok"]
    if bad:
        reasons = "; ".join(f"C={lv['concurrency']} {lv['status']}: {lv['reason']}" for lv in bad)
        code = EXIT_TIMEOUT if any(lv["status"] == "timeout" for lv in bad) else EXIT_FAILED
        raise BundleError(f"bench {topology.name}: {len(bad)} of {len(result['levels'])} levels did not "
                          f"complete cleanly (measured levels are recorded): {reasons}", exit_code=code)
    return 0


def _gone(stack, front_service: str) -> str | None:
    """Why the topology is no longer there to benchmark (`bundle down` mid-run), or None."""
    from bundle.errors import BundleError

    try:
        states = {s.service: s.state for s in stack.states()}
    except BundleError:
        return "its containers can no longer be listed"
    if front_service not in states:
        return f"{front_service} was removed (`bundle down`?)"
    if states[front_service] != "running":
        return f"{front_service} is {states[front_service]}"
    return None
