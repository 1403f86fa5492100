"""One candidate at a time: launch, smoke and bench (the services `bundle launch`, `bundle smoke` and
`bundle bench` run: readiness, attestation; the configured checks; the configured method) and down (volumes
kept: the JIT cache volume is keyed by the lock hash and serves every candidate). Each outcome is
recorded as it finishes; a failed or hung candidate is recorded as such and the sweep goes on; a
signal takes the candidate's stack down and ends the sweep with nothing left running.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from bundle import modes
from bundle.errors import BundleError, Failed, InputError, TimedOut
from bundle.service.bench import run_bench
from bundle.service.launch import LaunchRequest, launch
from bundle.service.smoke import run_smoke
from bundle.stack import docker, runstate
from bundle.tune import results
from bundle.tune.plan import Plan, Planned
from bundle.verify import bench, metrics
from bundle.reporter import Reporter
from bundle.targets.registry import stack_of
from bundle.api import Mode

REASON_CHARS = 600  # of an error's message, in the results line and the table
KEPT_METRICS = metrics.KEPT  # the bench's catalogue (bundle/verify/metrics.py)


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS] + " ..."


def _down(project: str, timeout: int | None = None) -> None:
    """Remove the candidate's containers (volumes kept), whatever state it is in."""
    try:
        if not docker.project_containers(project):
            return
        stack_of(runstate.load(project)).down(volumes=False, timeout=timeout)
    except BundleError:
        pass


@dataclass(frozen=True)
class Sweep:
    """How every candidate of a sweep is launched (from `bundle tune`'s flags)."""

    config: str | None  # the user's bundle.yaml, for messages; each candidate's config is its own
    mode: Mode | None  # None on a GPU host, else a tunable mode (the simulator: its speed rules rank)
    sim: Mapping[str, str] = field(default_factory=dict)  # the simulator's knobs
    launch_timeout: str | None = None  # each launch's readiness limit; None: lifecycle.launch_timeout


def _smoke(dep, topology, record) -> dict:
    smoked = run_smoke(dep, topology, record, stack_of(record))
    path = smoked.write(record.project, tune=True)
    return {"ok": smoked.result.ok, "reason": smoked.reasons, "report": str(path)}


def _bench(dep, topology, record, label: str, reporter: Reporter) -> dict:
    plan = bench.plan(dep, topology, record.env, label=label)
    result, run_dir = run_bench(dep, topology, record, stack_of(record), plan,
                                on_level=lambda lv: reporter.print(f"  bench C={lv.concurrency}: {lv.num_prompts} "
                                                                   f"prompts, limit {lv.timeout_s:.0f} s"))
    levels = [{"concurrency": lv["concurrency"], "status": lv["status"], "reason": lv.get("reason"),
               "metrics": {k: v for k, v in (lv.get("metrics") or {}).items() if k in KEPT_METRICS} or None}
              for lv in result["levels"]]
    bad = [lv for lv in result["levels"] if lv["status"] != "ok"]
    return {"ok": not bad, "run_id": result["run_id"], "levels": levels,
            "timeout": any(lv["status"] == "timeout" for lv in bad),
            "reason": "; ".join(f"C={lv['concurrency']} {lv['status']}: {lv['reason']}" for lv in bad)}


def run_candidate(item: Planned, plan: Plan, sweep: Sweep, reporter: Reporter) -> dict:
    """Launch, attest, smoke, bench and down one candidate; returns its results line (also appended
    to runs/<project>/tune/results.jsonl). KeyboardInterrupt (SIGINT, SIGTERM, SIGHUP) takes the
    stack down and propagates without a line, so a rerun runs the candidate again. The services are
    `bundle launch`'s, `bundle smoke`'s and `bundle bench`'s own."""
    from bundle import topology as registry

    cand, dep = item.candidate, item.dep
    topology = registry.get(plan.topology)
    line = {"key": cand.key, "name": cand.name, "origin": cand.origin, "overrides": cand.overrides,
            "changes": list(cand.changes), "topology": plan.topology, "project": plan.project,
            modes.record_key(): bool(sweep.mode), "sim": dict(sweep.sim),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "status": None, "phase": None, "reason": None,
            "seconds": {}, "levels": [], "bench_run_id": None, "launch_run_dir": None}
    phase = "launch"
    t0 = time.monotonic()
    try:
        try:
            launch(LaunchRequest(topology=plan.topology, config=sweep.config, mode=sweep.mode,
                                 sim=sweep.sim, timeout=sweep.launch_timeout), dep=dep, reporter=reporter)
        finally:
            line["seconds"]["launch"] = round(time.monotonic() - t0, 1)
            try:
                line["launch_run_dir"] = runstate.load(plan.project).run_dir
            except InputError:
                pass
        record = runstate.load(plan.project)
        phase = "smoke"
        t = time.monotonic()
        smoked = _smoke(dep, topology, record)
        line["seconds"]["smoke"] = round(time.monotonic() - t, 1)
        line["smoke_report"] = smoked["report"]
        if not smoked["ok"]:
            raise Failed(f"smoke failed: {smoked['reason']}")
        phase = "bench"
        t = time.monotonic()
        benched = _bench(dep, topology, record, f"tune {cand.name}", reporter)
        line["seconds"]["bench"] = round(time.monotonic() - t, 1)
        line.update(levels=benched["levels"], bench_run_id=benched["run_id"])
        if not benched["ok"]:
            raise (TimedOut if benched["timeout"] else Failed)(f"bench: {benched['reason']}")
        line.update(status="ok", phase="done")
    except KeyboardInterrupt:
        reporter.print(f"interrupted during {cand.name}'s {phase}: taking its stack down (volumes kept); "
                      f"a rerun runs it again")
        _down(plan.project, timeout=10)
        raise
    except BundleError as exc:
        line.update(status="timeout" if isinstance(exc, TimedOut) else "failed", phase=phase,
                    reason=_short(exc.message))
    t = time.monotonic()
    _down(plan.project)
    line["seconds"]["down"] = round(time.monotonic() - t, 1)
    line["seconds"]["total"] = round(time.monotonic() - t0, 1)
    line["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results.append(plan.project, line)
    return line


def run_sweep(plan: Plan, sweep: Sweep, reporter: Reporter, *, started: float,
              on_done: Callable[[dict], None] | None = None) -> list[dict]:
    """Every candidate still to run, in the plan's order; before each one the time spent plus its
    estimate is held to the budget (the estimate follows what this sweep measured)."""
    lines = []
    measured: list[float] = []
    todo = plan.to_run
    for index, item in enumerate(todo, 1):
        estimate = (sum(measured) / len(measured)) if measured else item.estimate_s
        spent = time.monotonic() - started
        if plan.budget_s is not None and spent + estimate > plan.budget_s:
            for rest in todo[index - 1:]:
                rest.candidate.skip = (f"over budget: {spent / 60:.1f} min spent, about {estimate / 60:.1f} min "
                                       f"more for this candidate, budget {plan.budget_s / 60:.1f} min")
            reporter.print(f"budget: stopping before {item.candidate.name} ({todo[index - 1].candidate.skip})")
            break
        reporter.print(f"\n[bold]candidate {index}/{len(todo)}: {item.candidate.name}[/] "
                      f"({', '.join(item.candidate.changes) or 'the config as it is'})")
        line = run_candidate(item, plan, sweep, reporter)
        lines.append(line)
        if line.get("seconds", {}).get("total"):
            measured.append(line["seconds"]["total"])
        colour = "green" if line["status"] == "ok" else "red"
        reporter.print(f"[{colour}]{item.candidate.name}: {line['status']}[/]"
                      + (f" in {line['phase']}: {line['reason']}" if line["status"] != "ok" else "")
                      + f" ({line['seconds'].get('total', 0):.0f} s)", markup=True)
        if on_done:
            on_done(line)
    return lines
