"""The sweep before it starts: every candidate merged onto the config and validated through the one
path every command takes (`prepare()`: schema, render, rules, SGLang's own parser) before any
launch; those that cannot work skipped with the reason; the least disruptive first; a duration
estimate from what runs/ recorded; the budget applied; finished candidates resumed.
"""

from __future__ import annotations

import copy
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from bundle import paths
from bundle.config.loader import deep_merge, defaults_data, schema_problems
from bundle.config.model import Deployment, build
from bundle.config.source import Source
from bundle.errors import ConfigError
from bundle.service.prepare import prepare
from bundle.stack import runstate
from bundle.tune import results
from bundle.tune.space import GRAPH_FLAG, Candidate, Space, candidates as space_candidates
from bundle.verify import runstore
from bundle import modes
from bundle.api import Mode

# How disruptive a change is, least first: what a restart with it costs beyond the restart itself.
# Collectives only change NCCL's environment; a graph cap only re-captures graphs; speculative
# decoding loads the MTP head and captures more graphs; a KV dtype, a MoE runner or a sparse-MLA
# kernel compiles other kernels (JIT caches miss on first use).
DISRUPTION = {"pcie_safe_collectives": 1, "cuda_graph_max_bs": 2, "speculative": 3, "kv_cache_dtype": 4,
              "sparse_mla": 5, "moe_runner": 5}
OTHER_DISRUPTION = 6  # any other key of bundle.yaml

# Assumed phase durations (s) when runs/ has none recorded: a GPU host loads 150 GB of weights and
# captures graphs (minutes; the original deployment's cold start), a run with no GPU seconds.
ASSUMED = {True: {"launch": 40.0, "smoke": 15.0, "down": 15.0, "level": 30.0},
           False: {"launch": 900.0, "smoke": 60.0, "down": 30.0, "level": 180.0}}


@dataclass
class Planned:
    candidate: Candidate
    dep: Deployment | None  # None when skipped before validation
    estimate_s: float = 0.0
    previous: dict | None = None  # the finished line a rerun resumes from


@dataclass
class Estimate:
    launch_s: float
    smoke_s: float
    bench_s: float
    down_s: float
    source: str  # where the numbers come from

    @property
    def per_candidate_s(self) -> float:
        return self.launch_s + self.smoke_s + self.bench_s + self.down_s


@dataclass
class Plan:
    topology: str
    project: str
    base: dict  # the config with the defaults and the space's bench filled in
    items: list[Planned]
    estimate: Estimate
    notes: list[str] = field(default_factory=list)
    budget_s: float | None = None

    @property
    def to_run(self) -> list[Planned]:
        return [p for p in self.items if p.candidate.skip is None and p.previous is None]

    @property
    def total_s(self) -> float:
        return sum(p.estimate_s for p in self.to_run)


# ---- ordering ------------------------------------------------------------------------------------
def _touched(overrides: dict, prefix: tuple = ()) -> list[tuple]:
    out = []
    for key, value in overrides.items():
        if isinstance(value, dict) and value:
            out += _touched(value, prefix + (key,))
        else:
            out.append(prefix + (key,))
    return out


def disruption(candidate: Candidate) -> int:
    """0 for the config as it is; else the most disruptive key the overrides touch."""
    if candidate.is_reference:
        return 0
    worst = 0
    for path in _touched(candidate.overrides):
        if path[:1] == ("levers",) and len(path) == 2:
            worst = max(worst, DISRUPTION.get(path[1], OTHER_DISRUPTION))
        elif path[-1] == "extra_args" and _only_graph_cap(candidate.overrides, path):
            worst = max(worst, DISRUPTION["cuda_graph_max_bs"])
        else:
            worst = max(worst, OTHER_DISRUPTION)
    return worst


def _only_graph_cap(overrides: dict, path: tuple) -> bool:
    node = overrides
    for part in path:
        node = node[part]
    return GRAPH_FLAG in [str(a) for a in node]


def order(cands: list[Candidate]) -> list[Candidate]:
    """Least disruptive first (the config itself first of all); ties keep the space's order."""
    return [c for _, c in sorted(enumerate(cands), key=lambda ic: (disruption(ic[1]), ic[0]))]


# ---- estimate ------------------------------------------------------------------------------------
def _median(values: list[float]) -> float | None:
    values = [float(v) for v in values if isinstance(v, (int, float)) and v > 0]
    return statistics.median(values) if values else None


def estimate(project: str, *, no_gpu: bool, levels: int, method: dict) -> Estimate:
    """Per-candidate phase durations: this project's earlier tune results first, then its launch
    records (ready.json) and bench history with the same method; assumed values for the rest."""
    assumed = ASSUMED[bool(no_gpu)]  # `no_gpu` may be a Mode: any of them
    done = [r for r in runstore.read_jsonl(results.results_path(project)) if r.get("status") == "ok"]
    seconds = {phase: _median([(r.get("seconds") or {}).get(phase) for r in done])
               for phase in ("launch", "smoke", "bench", "down")}
    sources = []
    if any(seconds.values()):
        sources.append(f"{len(done)} earlier tune candidates")
    if seconds["launch"] is None:
        ready = []
        for path in sorted(runstate.project_dir(project).glob("*-launch/ready.json")):
            try:
                ready.append(json.loads(path.read_text()).get("seconds"))
            except (OSError, ValueError):
                continue
        seconds["launch"] = _median(ready)
        if seconds["launch"] is not None:
            sources.append(f"{len(ready)} recorded launches")
    if seconds["bench"] is None:
        history = runstore.read_jsonl(runstate.project_dir(project) / runstore.BENCH_HISTORY)
        same = [sum(lv.get("seconds") or 0 for lv in r.get("levels", [])) for r in history
                if r.get("kind", "bench") == "bench" and r.get("ok")
                and {k: (r.get("config") or {}).get(k) for k in method} == method]
        seconds["bench"] = _median(same)
        if seconds["bench"] is not None:
            sources.append(f"{len(same)} recorded bench runs of the same method")
    fill = {"launch": assumed["launch"], "smoke": assumed["smoke"], "down": assumed["down"],
            "bench": assumed["level"] * levels}
    assumed_phases = [p for p, v in seconds.items() if v is None]
    if assumed_phases:
        sources.append(f"assumed ({modes.word() if no_gpu else 'GPU host'}) for {', '.join(assumed_phases)}")
    final = {p: (v if v is not None else fill[p]) for p, v in seconds.items()}
    return Estimate(final["launch"], final["smoke"], final["bench"], final["down"], "; ".join(sources))


# ---- skips ----------------------------------------------------------------------------------------
def find_audit_report(lock_hash: str) -> Path | None:
    """This lock's image-audit JSON under runs/: where `bundle audit` keeps its latest
    (runs/audit/lock-<hash>/latest.json), else the newest runs/**/audit*.json
    (`bundle audit --json > runs/audit.json`)."""
    from bundle.images import audit_record

    latest = audit_record.folder(lock_hash) / "latest.json"
    if latest.is_file():
        return latest
    found = [p for p in paths.runs_dir().glob("**/audit*.json") if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def audit_libraries(path: Path, lock_hash: str) -> tuple[dict[str, bool] | None, str]:
    """{library path (relative to site-packages): runs on sm_120}, and a note saying what was used."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return None, f"image audit {path} is unreadable ({exc}): the sm_120 kernel filter was skipped"
    if data.get("lock_hash") and data["lock_hash"] != lock_hash:
        return None, (f"image audit {path} is of lock {data['lock_hash']}, not this lock ({lock_hash}): "
                      f"the sm_120 kernel filter was skipped")
    from bundle.images.audit.checks_sm120 import SITE

    libs = {str(lib.get("path", "")).removeprefix(SITE): bool(lib.get("runs_on_sm120"))
            for lib in data.get("libraries") or []}
    return libs, f"sm_120 kernels: from the image audit {path}"


def kernel_problem(rendered, libs: dict[str, bool]) -> str | None:
    """The first library a server's chosen path needs that the audit found without sm_120 code."""
    from bundle.images.audit.kernels import NEEDS
    from bundle.rules.cmdline import option_value

    for service in rendered.commands:
        args = rendered.server_args(service)
        if args is None:
            continue
        for (name, value), needed in NEEDS.items():
            if option_value(args, "--" + name.replace("_", "-")) != value:
                continue
            bad = [lib for lib in needed if libs.get(lib) is False]
            if bad and len(bad) == len(needed):
                return (f"{service}: {name}={value} needs {', '.join(bad)}, which the image audit reports "
                        f"without sm_120 code")
    return None


def p2p_problem(dep: Deployment, project: str, *, no_gpu: bool, config_value="auto") -> str | None:
    """P2P collectives forced on where this host's probe said they are unsafe, or never probed; or a
    forced value that is what the config's `auto` already decides here (the same run twice)."""
    value = dep.levers.pcie_safe_collectives
    saved = runstate.project_dir(project) / "collectives.json"
    if config_value == "auto" and value != "auto":
        decided = True if no_gpu else None  # with no GPU, auto is the safe setting (nothing to probe)
        if decided is None and saved.is_file():
            data = json.loads(saved.read_text())
            decided = data.get("pcie_safe") if data.get("source") == "probe" else None
        if decided is value:
            why = f"a {modes.word()}: the safe setting" if no_gpu else "this host's probe"
            return (f"levers.pcie_safe_collectives: auto already decides {str(value).lower()} here "
                    f"({why}): the same as the config")
    if value is not False or no_gpu:
        return None
    if not saved.is_file():
        return ("P2P collectives need this host's probe first: launch once with "
                "levers.pcie_safe_collectives: auto (it probes NCCL with P2P on and off)")
    data = json.loads(saved.read_text())
    if data.get("source") == "probe" and data.get("pcie_safe"):
        return f"this host's probe chose PCIe-safe collectives: {data.get('reason')}"
    if data.get("source") != "probe":
        return f"P2P was never probed on this host ({data.get('reason')})"
    return None


# ---- the plan ------------------------------------------------------------------------------------
def merged_config(user: Source | None, space: Space) -> dict:
    """The config as it runs (defaults + the user's file) with the space's bench keys."""
    merged = deep_merge(defaults_data(), user.data if user else {})
    return deep_merge(merged, {"bench": space.bench} if space.bench else {})


def candidate_deployment(user: Source, base: dict, cand: Candidate) -> Deployment:
    """The candidate's Deployment: its overrides merged onto the config; the merge is held to the
    bundle schema again (a candidate may set keys the user's file never had)."""
    problems = schema_problems(deep_merge(copy.deepcopy(user.data), cand.overrides), user)
    if problems:
        raise ConfigError(problems, source=user.name)
    return build(user, deep_merge(copy.deepcopy(base), cand.overrides))


def make_plan(space: Space, user: Source, *, topology: str, mode: Mode | None, sim: dict,
              budget_s: float | None, lock_hash: str, extra_env: dict | None = None) -> Plan:
    """Every candidate through the one path every command takes (service.prepare: the env of `mode` (None
    on a GPU host) and its knobs `sim`, `extra_env` over it), ordered, estimated, skipped with reasons."""
    base = merged_config(user, space)
    project = f"{base['project']}-{topology}"
    cands = order(space_candidates(space, base, topology))
    done = results.finished(project)
    notes = []
    report_path = find_audit_report(lock_hash)
    libs = None
    if report_path is None:
        notes.append("no image audit report of this lock under runs/ (`bundle audit`): "
                     "the sm_120 kernel filter was skipped")
    else:
        libs, note = audit_libraries(report_path, lock_hash)
        notes.append(note)
    # The config itself must be sound: its problems are the user's to fix (ConfigError, exit 3), not
    # a reason to skip every candidate.
    prepare(topology, dep=build(user, copy.deepcopy(base)), mode=mode, sim=sim, extra_env=extra_env,
            require_model=mode is None)
    items = []
    for cand in cands:
        cand.key = results.resume_key(topology=topology, overrides=cand.overrides, config=base,
                                      bench=base["bench"], mode=modes.record_value(mode), sim=sim,
                                      lock_hash=lock_hash)
        try:
            dep = candidate_deployment(user, base, cand)
            prepared = prepare(topology, dep=dep, mode=mode, sim=sim, extra_env=extra_env,
                               require_model=mode is None)
        except ConfigError as exc:
            cand.skip = "rejected before launch: " + "; ".join(exc.problems)
            items.append(Planned(cand, None))
            continue
        cand.skip = p2p_problem(dep, project, no_gpu=mode is not None,
                                config_value=base["levers"]["pcie_safe_collectives"])
        if cand.skip is None and libs is not None:
            cand.skip = kernel_problem(prepared.rendered, libs)
        items.append(Planned(cand, dep, previous=done.get(cand.key)))
    method = {k: base["bench"][k] for k in ("input_len", "output_len", "concurrency", "prompts_per_concurrency")}
    est = estimate(project, no_gpu=mode is not None, levels=len(base["bench"]["concurrency"]), method=method)
    plan = Plan(topology, project, base, items, est, notes, budget_s)
    running = 0.0
    for item in items:
        if item.candidate.skip or item.previous:
            continue
        item.estimate_s = est.per_candidate_s
        if budget_s is not None and running + item.estimate_s > budget_s:
            item.candidate.skip = (f"over budget: the sweep would reach about {_minutes(running + item.estimate_s)} "
                                   f"of {_minutes(budget_s)}")
            item.estimate_s = 0.0
            continue
        running += item.estimate_s
    return plan


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
