"""`bundle bench [tp4|pd|dp] [-c FILE] [--concurrency 1 8] [--input-len N] [--output-len N]
[--prompts-per-concurrency N] [--level-timeout DURATION] [--label TEXT] [--profile [C]]`

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
    parser.add_argument("--profile", type=int, nargs="?", const=0, metavar="C",  # 0: service's PROFILE_HIGHEST
                        help="after the levels, run level C (alone: the highest) once more with SGLang's own "
                             "profiler on every server for a few steps, and print each server's time per "
                             "step by kernel family (traces under the run's profile/ folder)")
    parser.add_argument("--json", action="store_true", help="print the run's JSON record on stdout")


def request_of(args: argparse.Namespace):
    from bundle.service.bench import BenchRequest

    return BenchRequest(concurrency=tuple(args.concurrency) if args.concurrency else None,
                        input_len=args.input_len, output_len=args.output_len,
                        prompts_per_concurrency=args.prompts_per_concurrency, level_timeout=args.level_timeout,
                        range_ratio=args.range_ratio, label=args.label, gate=args.gate, against=args.against,
                        soak=args.soak, profile=args.profile)


def run(args: argparse.Namespace) -> int:
    import json

    from bundle.commands._common import find_request
    from bundle.service.finding import one_running
    from bundle.errors import Failed, TimedOut
    from bundle.service import bench as bench_service
    from bundle.verify import tables
    from bundle.reporter import report_console

    target = one_running(find_request(args), verb="benchmark")
    dep, topology, record = target.dep, target.topology, target.launch
    request = request_of(args)
    console = report_console(stderr=args.json)  # --json: stdout holds the record alone
    if request.soak:
        return _soak(args, request, target, console)
    benched = bench_service.benchmark(dep, topology, record, target.stack(), request, console)
    result = benched.result.as_dict()
    if args.json:
        print(bench_service.redacted(dep, topology, json.dumps(result, indent=2)))
    else:
        console.print(tables.bench_table(result))
        for line in bench_service.verdict_lines(result):
            console.print(line, markup=False)
        comparison = tables.comparison_table(result, benched.baseline, benched.previous,
                                             previous_name=benched.compared_as,
                                             unlike_previous=benched.unlike_previous)
        console.print(comparison if comparison is not None else
                      "nothing to compare with: no C=1 level for the baseline, no previous run")
    for line in benched.profile_lines():
        console.print(line, markup=False)
    console.print(f"recorded: {benched.history_path} (run {benched.result.run_id}); details: {benched.run_dir}"
                  + (f"; plot: {benched.plot}" if benched.plot else "; no plot (pip install '.[plot]' for matplotlib)"))
    gated = _gate(args, benched.history, result, benched.run_dir, console) if args.gate is not None else None
    bad = benched.bad_levels
    if bad:
        reasons = "; ".join(f"C={lv.concurrency} {lv.status}: {lv.reason}" for lv in bad)
        kind = TimedOut if any(lv.status == "timeout" for lv in bad) else Failed
        raise kind(f"bench {topology.name}: {len(bad)} of {len(benched.result.levels)} levels did not "
                   f"complete cleanly (measured levels are recorded): {reasons}")
    if gated is not None and not gated.ok:
        what = "; ".join(gated.regressions) or "no level was measured in both runs"
        raise Failed(f"bench {topology.name}: regression gate ({args.gate:g}%) against run "
                     f"{gated.against} failed: {what}")
    return 0


def _gate(args, history, result, run_dir, console):
    """The gate's verdict (bundle/service/bench.py's gate()), its lines printed."""
    from bundle.service import bench as bench_service
    from bundle.verify import tables

    gated = bench_service.gate(history, result, run_dir, percent=args.gate, against=args.against)
    for line in tables.gate_lines(gated):
        console.print(line, markup=False)
    return gated


def _soak(args, request, target, console) -> int:
    """`--soak DURATION`: one concurrency for a fixed time; exit 1 on any error."""
    import json

    from bundle.errors import Failed
    from bundle.service import bench as bench_service
    from bundle.verify import tables

    dep, topology, record = target.dep, target.topology, target.launch
    soaked = bench_service.soak(dep, topology, record, target.stack(), request, console)
    result = soaked.result
    if args.json:
        print(bench_service.redacted(dep, topology, json.dumps(result, indent=2)))
    else:
        console.print(tables.soak_table(result))
    console.print(f"recorded: {soaked.history_path} (run {result['run_id']}); details: {soaked.run_dir}")
    if not result["ok"]:
        s = result["soak"]
        why = s["stopped"] or (f"{s['failed']} of {s['completed'] + s['failed']} requests failed: "
                               f"{'; '.join(s['error_samples']) or 'no error text'}" if s["failed"]
                               else "no request completed")
        raise Failed(f"soak {topology.name} failed: {why}")
    return 0
