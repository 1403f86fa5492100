"""A sweep's output: the ranked table (rich), a PNG of throughput against latency for every
candidate, and bundle.tuned.yaml (the config with the winner's overrides, and a comment giving the
evidence). A sweep with no GPU (a Mode) says so in the table's title, the plot's title and the file's comment,
in its mode's words (Mode.notes["tune"])."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import yaml
from rich.markup import escape
from rich.table import Table

from bundle.api import Mode
from bundle.config.loader import deep_merge
from bundle.config.source import Source
from bundle.tune import results
from bundle.verify import metrics as metric_names
from bundle.tune.space import Objective



def _note(mode: Mode | None) -> str:
    """What the sweep's mode says of its speeds ("" on a GPU host)."""
    return mode.notes.get("tune", "") if mode else ""


def _fmt(value, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _metric(record: dict, level: dict | None, key: str):
    return ((level or {}).get("metrics") or {}).get(key)


def ranked_table(ranked: list[dict], objective: Objective, *, mode: Mode | None, reference: dict | None) -> Table:
    title = f"bundle tune: {objective.describe()}" + (f" ({_note(mode)})" if _note(mode) else "")
    table = Table(title=title, title_justify="left")
    for column, justify in (("#", "right"), ("candidate", "left"), ("changes", "left"), ("status", "left"),
                            ("score", "right"), ("vs defaults", "right"), ("at", "right"), ("out tok/s", "right"),
                            ("TPOT ms", "right"), ("TTFT ms", "right"), ("launch s", "right"), ("note", "left")):
        table.add_column(column, justify=justify, overflow="fold")
    base = reference.get("score") if reference else None
    higher = objective.metric == "throughput"
    for n, record in enumerate(ranked, 1):
        status = record.get("status") or "skipped"
        colour = {"ok": "green", "skipped": "yellow"}.get(status, "red")
        level = results.best_level(record, objective)
        value = record.get("score")
        change = "-"
        if value is not None and base:
            pct = (value - base) / base * 100
            better = pct > 0 if higher else pct < 0
            change = f"[{'green' if better else 'red' if abs(pct) >= 0.05 else 'white'}]{pct:+.1f}%[/]"
        note = record.get("reason") or ("" if value is not None else record.get("score_at") or "")
        if record.get("resumed"):
            note = ("resumed from an earlier run. " + note).strip()
        table.add_row(str(n), escape(record["name"]), escape(", ".join(record.get("changes") or []) or "(as configured)"),
                      f"[{colour}]{status}[/]" + (f" ({record['phase']})" if status not in ("ok", "skipped")
                                                  and record.get("phase") else ""),
                      _fmt(value), change, record.get("score_at") if value is not None else "-",
                      _fmt(_metric(record, level, metric_names.THROUGHPUT)), _fmt(_metric(record, level, metric_names.TPOT)),
                      _fmt(_metric(record, level, metric_names.TTFT)), _fmt((record.get("seconds") or {}).get("launch"), 0),
                      escape(note))
    return table


def plot(ranked: list[dict], path: Path, *, mode: Mode | None, topology: str, objective: Objective) -> Path | None:
    """Output throughput against mean TPOT, every measured level of every candidate (a line per
    candidate, a marker per level); None without matplotlib (the `plot` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(9, 5))
    drawn = 0
    for record in ranked:
        points = sorted((lv["metrics"][metric_names.TPOT], lv["metrics"][metric_names.THROUGHPUT], lv["concurrency"])
                        for lv in record.get("levels", []) if lv.get("metrics")
                        and lv["metrics"].get(metric_names.TPOT) is not None
                        and lv["metrics"].get(metric_names.THROUGHPUT) is not None)
        if not points:
            continue
        drawn += 1
        xs, ys, cs = zip(*points)
        ax.plot(xs, ys, "o-", label=f"{record['name']}" + (" (winner)" if drawn == 1 and record.get("score") else ""))
        for x, y, c in points:
            ax.annotate(f"C={c}", (x, y), fontsize=7, textcoords="offset points", xytext=(4, 4))
    if objective.max_tpot_ms:
        ax.axvline(objective.max_tpot_ms, color="red", linestyle="--", alpha=0.5, label="TPOT bound")
    ax.set_xlabel("mean TPOT (ms)")
    ax.set_ylabel("output throughput (tok/s)")
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(fontsize=7)
    head = f"{_note(mode)}\n" if _note(mode) else ""
    ax.set_title(f"{head}bundle tune {topology}: throughput against latency, {objective.describe()}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def tuned_config(user: Source | None, winner: dict, reference: dict | None, *, topology: str, objective: Objective,
                 mode: Mode | None, sweep_dir: Path, space_name: str, project: str) -> str:
    """The text of bundle.tuned.yaml: the user's file (so it stands in for -c FILE: same project,
    network, model) with the winner's overrides merged in; a comment names the overrides and their
    evidence. With no user file it holds the overrides alone."""
    data = deep_merge(copy.deepcopy(user.data) if user else {}, winner.get("overrides") or {})
    if not data:
        data = {"project": project.rsplit("-", 1)[0]}  # an empty file means "the defaults" and is refused
    level = results.best_level(winner, objective)
    m = (level or {}).get("metrics") or {}
    lines = [f"# Written by `bundle tune {topology}` on {time.strftime('%Y-%m-%d %H:%M')}: do not edit by hand; "
             f"edit {user.name if user else 'your bundle.yaml'} and tune again.",
             f"# The config {user.name if user else '(embedded defaults)'} with the winning overrides of the "
             f"sweep over {space_name}:"]
    changes = winner.get("changes") or []
    lines += [f"#   {c}" for c in changes] or ["#   (none: the config as it is won)"]
    lines.append(f"# Evidence ({objective.describe()}): {winner['name']} scored {_fmt(winner.get('score'))} at "
                 f"{winner.get('score_at')}: {_fmt(m.get(metric_names.THROUGHPUT))} out tok/s, mean TPOT "
                 f"{_fmt(m.get(metric_names.TPOT))} ms, mean TTFT {_fmt(m.get(metric_names.TTFT))} ms "
                 f"(bench run {winner.get('bench_run_id')}).")
    if reference and reference.get("score") is not None and reference is not winner:
        pct = (winner["score"] - reference["score"]) / reference["score"] * 100
        lines.append(f"# Against the config as it is: {_fmt(reference['score'])} ({pct:+.1f}%), bench run "
                     f"{reference.get('bench_run_id')}; after `bundle launch {topology} -c bundle.tuned.yaml`, "
                     f"`bundle bench -c bundle.tuned.yaml --against {reference.get('bench_run_id')}` shows the gain.")
    if _note(mode):
        lines.append(f"# {_note(mode)}.")
    lines.append(f"# Every candidate: {sweep_dir / 'sweep.json'}")
    return "\n".join(lines) + "\n" + yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def sweep_record(plan, ranked: list[dict], *, objective: Objective, interrupted: bool, winner: dict | None,
                 tuned: str | None) -> dict:
    return {"topology": plan.topology, "project": plan.project, "objective": objective.__dict__,
            "interrupted": interrupted, "notes": plan.notes,
            "estimate": {"per_candidate_s": round(plan.estimate.per_candidate_s, 1), "source": plan.estimate.source},
            "winner": winner.get("name") if winner else None, "tuned_config": tuned,
            "candidates": json.loads(json.dumps(ranked, default=str))}
