"""`bundle bench` as a service, and the benchmark `bundle tune` runs: bench_serving against a launched
topology, the plan's levels (or a soak) through the front door, stopped early when the stack goes away.

BenchRequest in (the verb's flags as typed values), Benched or Soaked out: the run's record, its folder,
what it compares with; progress goes to the Reporter the verb passes in. The verb prints the tables and
maps the outcome to its exit code; gate() is the regression gate, run after the tables are shown."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from bundle import modes
from bundle.config.model import Deployment
from bundle.durations import parse_duration
from bundle.errors import BundleError, Failed, UsageError
from bundle.stack import runstate
from bundle.stack.frontdoor import front_door
from bundle.topology import PREFILL, Topology
from bundle.verify import bench, comparable, limits, profile_floor, runstore, server_profile
from bundle.reporter import Reporter
from bundle.verify.plot import plot_bench
from bundle.api import StackView

# A log gets a progress line at most this often (a terminal shows it live in the status line).
PROGRESS_EVERY_S = 15.0
PROFILE_HIGHEST = 0  # BenchRequest.profile: the highest level


@dataclass(frozen=True)
class BenchRequest:
    """What `bundle bench` was asked for; None: the config's bench section."""

    concurrency: tuple[int, ...] | None = None  # each level its own run; a soak takes one
    input_len: int | None = None
    output_len: int | None = None
    prompts_per_concurrency: int | None = None
    level_timeout: str | None = None  # a duration
    range_ratio: float | None = None
    label: str | None = None  # the run's name in the history, table and plot
    gate: float | None = None  # percent a metric may get worse than the reference; None: no gate
    against: str | None = None  # the run id the table and the gate compare with; None: the previous
    soak: str | None = None  # a duration: one concurrency for this long, in place of the levels
    profile: int | None = None  # a level's concurrency to profile with SGLang's profiler (PROFILE_HIGHEST: the highest)


@dataclass(frozen=True)
class Benched:
    result: bench.BenchResult  # the run's record (as appended to bench.jsonl), typed
    run_dir: Path
    history: list[dict]  # bench.jsonl as it was before this run
    history_path: Path
    baseline: dict | None  # bench.baseline of the config
    previous: dict | None  # the run the table compares with (--against's, else the latest like it)
    compared_as: str  # how the table names it: "run" (named) or "previous run"
    unlike_previous: dict | None  # the latest run unlike this one, when none is like it
    plot: Path | None  # None without matplotlib
    profile: list[server_profile.ServerProfile] | None = None  # --profile: each server's table
    profiled: tuple[str, dict | None] | None = None  # --profile: the level's label and its `limit` entry

    @property
    def bad_levels(self) -> tuple[bench.LevelResult, ...]:
        return self.result.bad_levels

    def profile_lines(self) -> list[str]:
        """`--profile`: each server's per-family table, each set against the level's floor, as lines to
        print (none without a profile)."""
        if self.profile is None:
            return []
        label, limit = self.profiled or ("the level", None)
        return server_profile.lines(self.profile, under=lambda table: profile_floor.lines(table, limit, label))


@dataclass(frozen=True)
class Soaked:
    result: dict
    run_dir: Path
    history_path: Path


def history_path(project: str) -> Path:
    return runstate.project_dir(project) / runstore.BENCH_HISTORY


def check(request: BenchRequest) -> None:
    """The request's own errors (usage errors, exit 2), before anything runs."""
    for value, name in ((request.input_len, "--input-len"), (request.output_len, "--output-len"),
                        (request.prompts_per_concurrency, "--prompts-per-concurrency")):
        if value is not None and value < 1:
            raise UsageError(f"{name} must be at least 1")
    if request.concurrency and min(request.concurrency) < 1:
        raise UsageError("--concurrency levels must be at least 1")
    if request.gate is not None and (request.gate < 0 or request.soak):
        raise UsageError("--gate takes a percentage >= 0 and gates a benchmark, not a soak")
    if request.profile is not None and (request.profile < 0 or request.soak):
        raise UsageError("--profile takes a level's concurrency (or nothing: the highest) and profiles a "
                         "benchmark's level, not a soak")


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


def decoding_roles(dep: Deployment, topology: Topology) -> list:
    """The servers that decode: a disaggregated topology's decode server, a replicated one's replicas."""
    return [role for role in dep.roles(topology) if role.service.role != PREFILL] or dep.roles(topology)


def limits_of(dep: Deployment, topology: Topology, record: runstate.LaunchRecord) -> limits.Limits:
    """What the levels are scored against: the decoding servers' TP size and GPUs (a disaggregated
    topology's decode server, a replicated one's replicas), the model folder's config.json, the launch's
    attestation and the project's collectives decision (bundle/verify/limits.py)."""
    decoding = decoding_roles(dep, topology)
    first = decoding[0]
    kind = comparable.kind({modes.record_key(): record.mode})
    return limits.build(kind=kind, model_folder=record.env.get("MODEL_HOST_PATH"), gpu_names=[], tp=first.tp_size,
                        servers=len(decoding), gpus=tuple(first.gpus), speculative=dep.levers.speculative,
                        dspark_block=dep.levers.dspark.block_size,
                        attestation_path=Path(record.run_dir) / "attestation.json" if record.run_dir else None,
                        collectives_path=runstate.project_dir(record.project) / "collectives.json")


def run_bench(dep: Deployment, topology: Topology, record: runstate.LaunchRecord, stack: StackView,
              plan: bench.BenchPlan, *, on_level: Callable | None = None, on_progress: Callable | None = None,
              scoring: limits.Limits | None = None, keep_record: bool = True):
    """Every level of `plan` against what `record` launched, each scored against the limit (`scoring`,
    else limits_of()); returns (the run's record, its folder). `keep_record=False`: the caller records it
    (bench.keep)."""
    return bench.run(stack, plan, project=record.project, mode=record.mode, env=record.env,
                     target=record.target, api_key_file=dep.api_key_file, redact=front_door(dep, topology).redact,
                     on_level=on_level, on_progress=on_progress,
                     stack_gone=lambda: stack_gone(stack, topology.front_service),
                     limits=scoring or limits_of(dep, topology, record), keep_record=keep_record)


def run_soak(dep: Deployment, topology: Topology, record: runstate.LaunchRecord, stack: StackView,
             plan: bench.BenchPlan, *, duration_s: float, on_round: Callable | None = None):
    """One concurrency for `duration_s` against what `record` launched; returns (its record, its folder)."""
    return bench.run_soak(stack, plan, duration_s=duration_s, project=record.project, mode=record.mode,
                          env=record.env, api_key_file=dep.api_key_file, redact=front_door(dep, topology).redact,
                          on_round=on_round, stack_gone=lambda: stack_gone(stack, topology.front_service))


def benchmark(dep: Deployment, topology: Topology, record: runstate.LaunchRecord, stack: StackView,
              request: BenchRequest, reporter: Reporter) -> Benched:
    """`bundle bench`'s levels: each level and its progress reported, the run recorded (a level that
    fails is in the record: see Benched.bad_levels), its plot drawn. Raises BundleError for a request
    it cannot run (exit 2), before anything is sent."""
    check(request)
    plan = bench.plan(dep, topology, record.env, concurrency=_levels(request.concurrency),
                      input_len=request.input_len, output_len=request.output_len,
                      prompts_per_concurrency=request.prompts_per_concurrency,
                      level_timeout=request.level_timeout, range_ratio=request.range_ratio, label=request.label)
    profiled_level = _profiled_level(plan, request.profile)
    path = history_path(record.project)
    history = runstore.read_jsonl(path)
    against, compared_as = None, "previous run"
    if request.against:  # e.g. the defaults' run that `bundle tune` names in bundle.tuned.yaml
        against, compared_as = bench.gate_reference(history, {"run_id": None}, request.against), "run"
        if against is None:
            raise UsageError(f"--against {request.against!r}: no such run in {path} (or it names more "
                             f"than one)", hint="name a run_id of that file")
    reporter.print(f"bench {topology.name}: bench_serving in the image against {plan.base_url}; "
                   f"dataset: {plan.dataset_source}")
    with reporter.status("starting ...") as status:
        printed = {"at": 0.0, "line": ""}

        def on_level(level):
            n = plan.levels.index(level) + 1
            status.update(f"level {n} of {len(plan.levels)}: C={level.concurrency}: {level.num_prompts} prompts, "
                          f"limit {level.timeout_s:.0f} s ...")
            reporter.print(f"level {n} of {len(plan.levels)}: C={level.concurrency}: {level.num_prompts} prompts "
                           f"({level.input_len} in / {level.output_len} out), limit {level.timeout_s:.0f} s")
            printed.update(at=time.monotonic(), line="")

        def on_progress(progress):
            # A terminal shows it live in the status line; a log gets a line when it changed, at
            # most every PROGRESS_EVERY_S seconds (a long level never looks hung, a log stays short).
            line = progress.line()
            if reporter.is_terminal:
                status.update(line)
            elif line.split(" (")[0] != printed["line"] and time.monotonic() - printed["at"] >= PROGRESS_EVERY_S:
                reporter.print(line, markup=False)
                printed.update(at=time.monotonic(), line=line.split(" (")[0])
        # one Limits for the levels and the profile's verdict (it reads nvidia-smi or probes the host)
        scoring = limits_of(dep, topology, record)
        result, run_dir = run_bench(dep, topology, record, stack, plan, on_level=on_level, on_progress=on_progress,
                                    scoring=scoring, keep_record=profiled_level is None)
    baseline = asdict(dep.bench.baseline) if dep.bench.baseline else None
    # Only like with like in percent (bundle/verify/comparable.py): the named run is shown even when
    # it is unlike (its row says why there is no comparison); otherwise the latest run like this one.
    previous = against or runstore.previous_bench(history, result)
    unlike_previous = None if previous else comparable.latest_unlike(history, result)
    plot = plot_bench(result, run_dir / "bench.png", baseline=baseline, previous=previous)
    profile, profiled = None, None
    if profiled_level is not None:
        try:
            profile = _profile(dep, topology, record, stack, plan, profiled_level, run_dir, reporter)
            profiled = (f"C={profiled_level.concurrency}",
                        _judged_with_profile(result, profiled_level.concurrency, profile, scoring))
        finally:  # the measured levels are recorded whatever became of the profile
            bench.keep(result, run_dir)
    return Benched(bench.BenchResult(result), run_dir, history, path, baseline, previous, compared_as,
                   unlike_previous, plot, profile, profiled)


def _judged_with_profile(result: dict, concurrency: int, servers: list[server_profile.ServerProfile],
                         scoring: limits.Limits) -> dict | None:
    """The profiled level's measured entry judged again with the profile's families as evidence (where a
    table is comparable with its floor: profile_floor.py); returns its `limit` entry."""
    entry = next((lv for lv in result["levels"] if lv["concurrency"] == concurrency), None)
    limit = (entry or {}).get("limit")
    label = f"C={concurrency}"
    evidence = profile_floor.evidence([p for s in servers for p in s.profiles], limit, label)
    if evidence is not None:
        entry["limit"] = limits.score_level(scoring, entry, result["config"], profile=evidence)
    return (entry or {}).get("limit")


def _profiled_level(plan: bench.BenchPlan, concurrency: int | None):
    """The level `--profile C` names (PROFILE_HIGHEST: the highest), or None; a C the plan lacks is a
    usage error, before anything runs."""
    if concurrency is None:
        return None
    levels = {lv.concurrency: lv for lv in plan.levels}
    wanted = max(levels) if concurrency == PROFILE_HIGHEST else concurrency
    if wanted not in levels:
        raise UsageError(f"--profile {concurrency}: no level of concurrency {concurrency} in this run "
                         f"(levels: {', '.join(map(str, levels))})", hint="name one of the levels, or give "
                         "--profile alone for the highest")
    return levels[wanted]


def _profile(dep, topology, record, stack, plan, level, run_dir, reporter) -> list[server_profile.ServerProfile]:
    """`--profile`: the level run once more with SGLang's profiler armed on every server (not measured)."""
    from bundle.stack.workers import ComposeWorkers

    servers = {role.name: role.name for role in dep.roles(topology)}
    workers = ComposeWorkers(stack, servers, port=dep.network.worker_port)
    reporter.print(f"profile: C={level.concurrency} once more with SGLang's profiler on {', '.join(servers)} "
                   f"({server_profile.DEFAULT_STEPS} steps a stage; not a measured level)")
    with reporter.status("profiling ..."):
        profiled, entry = server_profile.profile_level(
            stack, workers, level, plan, run_dir=run_dir, project=record.project, api_key_file=dep.api_key_file,
            redact=front_door(dep, topology).redact, services=servers,
            stack_gone=lambda: stack_gone(stack, topology.front_service))
    if entry["status"] != "ok":
        reporter.print(f"profile: the profiled run of C={level.concurrency} {entry['status']}: {entry['reason']}",
                       markup=False)
    return profiled


def gate(history: list[dict], result: dict | bench.BenchResult, run_dir: Path, *, percent: float,
         against: str | None) -> bench.Gated:
    """The gate's verdict (also written to the run's gate.json); no earlier run to compare with is
    an error, never a silent pass."""
    result = result.record if isinstance(result, bench.BenchResult) else result
    reference = bench.gate_reference(history, result, against)
    if reference is None:
        wanted = (f"run {against!r} is not in the history (or names more than one)" if against else
                  "no earlier run of this topology with the same config and image")
        raise Failed(f"bench --gate: {wanted}; nothing to gate against (this run is recorded: "
                     f"{result['run_id']})", hint="run once without --gate to record a reference, or "
                     "name one with --against RUN")
    if reason := comparable.unlike(result, reference):
        raise Failed(f"bench --gate against run {reference.get('run_id')}: no comparison: {reason} "
                     f"(this run is recorded: {result['run_id']})",
                     hint=f"gate against a run of the same topology, GPU or {modes.word()} mode, target and "
                          "lengths (--against RUN), or run once without --gate to record one")
    gated = bench.gate(result, reference, percent)
    runstore.write_json(run_dir / "gate.json", gated.as_dict())
    return gated


def soak(dep: Deployment, topology: Topology, record: runstate.LaunchRecord, stack: StackView,
         request: BenchRequest, reporter: Reporter) -> Soaked:
    """`--soak DURATION`: one concurrency for a fixed time, each round reported; the record says
    whether it held (result["ok"])."""
    check(request)
    duration = parse_duration(request.soak, what="--soak")
    concurrency = _levels(request.concurrency) or [max(dep.bench.concurrency)]
    if len(concurrency) != 1:
        raise UsageError("--soak runs one concurrency: give --concurrency one level")
    plan = bench.plan(dep, topology, record.env, concurrency=concurrency, input_len=request.input_len,
                      output_len=request.output_len, prompts_per_concurrency=request.prompts_per_concurrency,
                      level_timeout=request.soak, range_ratio=request.range_ratio, label=request.label)
    reporter.print(f"soak {topology.name}: C={concurrency[0]} for {duration:.0f} s against {plan.base_url}")
    result, run_dir = run_soak(dep, topology, record, stack, plan, duration_s=duration,
                               on_round=lambda n, left: reporter.print(f"round {n}: {left:.0f} s left"))
    return Soaked(result, run_dir, history_path(record.project))


def _levels(concurrency: tuple[int, ...] | None) -> list[int] | None:
    return list(concurrency) if concurrency else None


def redacted(dep: Deployment, topology: Topology, text: str) -> str:
    """`text` with the front door's API key taken out (the verb prints the record as JSON)."""
    return front_door(dep, topology).redact(text)


def verdict_lines(result: dict) -> list[str]:
    """The bench's verdict against the machine's limit, as lines for the verb to print."""
    return list(limits.verdict_lines(result))
