"""Each candidate's outcome, one JSON line as it finishes (runs/<project>/tune/results.jsonl), the
resume that skips what is already there, and the objective's score and ranking.

A line is keyed by the candidate's resume key (a hash of its overrides and the config it was
merged onto): a rerun of the same sweep finds its finished candidates and does not repeat them; a
changed config or bench method makes new keys, so nothing stale is reused. A candidate cut short
by Ctrl-C writes no line: the rerun runs it again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from bundle import modes
from bundle.stack import runstate
from bundle.tune.space import Objective
from bundle.verify import metrics as metric_names
from bundle.verify import runstore

RESULTS_NAME = "results.jsonl"
FINISHED = ("ok", "failed", "timeout")  # a line with one of these is not run again


def tune_dir(project: str) -> Path:
    return runstate.project_dir(project) / "tune"


def results_path(project: str) -> Path:
    return tune_dir(project) / RESULTS_NAME


def resume_key(*, topology: str, overrides: dict, config: dict, bench: dict, mode: str | None,
               sim: dict, lock_hash: str) -> str:
    """12 hex chars of sha256 over what decides a candidate's numbers (`mode`: the no-GPU mode's name, under
    the records' key for it, so earlier sweeps' keys still match)."""
    text = json.dumps({"topology": topology, "overrides": overrides, "config": config, "bench": bench,
                       modes.record_key(): mode, "sim": sim, "lock_hash": lock_hash}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def append(project: str, record: dict) -> Path:
    return runstore.append_jsonl(results_path(project), record)


def finished(project: str) -> dict[str, dict]:
    """key -> the last finished line for it."""
    out = {}
    for line in runstore.read_jsonl(results_path(project)):
        if line.get("status") in FINISHED and line.get("key"):
            out[line["key"]] = line
    return out


# ---- the objective ------------------------------------------------------------------------------
def _within(metrics: dict, objective: Objective) -> bool:
    tpot, ttft = metrics.get(metric_names.TPOT), metrics.get(metric_names.TTFT)
    if objective.max_tpot_ms is not None and (tpot is None or tpot > objective.max_tpot_ms):
        return False
    if objective.max_ttft_ms is not None and (ttft is None or ttft > objective.max_ttft_ms):
        return False
    return True


def score(record: dict, objective: Objective) -> tuple[float | None, str]:
    """(the objective's value, which level gave it) of a finished candidate; None when it failed or
    no level qualifies (the reason in the text)."""
    if record.get("status") != "ok":
        return None, record.get("status", "not run")
    levels = [lv for lv in record.get("levels", []) if lv.get("metrics")]
    if objective.metric == "tpot":
        one = [lv for lv in levels if lv["concurrency"] == 1 and lv["metrics"].get(metric_names.TPOT) is not None]
        if not one:
            return None, "no C=1 level measured"
        return float(one[0]["metrics"][metric_names.TPOT]), "C=1"
    ok = [lv for lv in levels if _within(lv["metrics"], objective)
          and lv["metrics"].get(metric_names.THROUGHPUT) is not None]
    if not ok:
        return None, "no level within the bound"
    best = max(ok, key=lambda lv: lv["metrics"][metric_names.THROUGHPUT])
    return float(best["metrics"][metric_names.THROUGHPUT]), f"C={best['concurrency']}"


def rank(records: list[dict], objective: Objective) -> list[dict]:
    """Best first: scored candidates by the objective, then those that ran but do not qualify, then
    failed ones, then skipped ones. Each record gets `score` and `score_at`."""
    for record in records:
        record["score"], record["score_at"] = score(record, objective)
    higher = objective.metric == "throughput"

    def order(record):
        value = record["score"]
        group = 0 if value is not None else (1 if record.get("status") == "ok" else
                                             2 if record.get("status") in FINISHED else 3)
        return (group, -(value or 0) if higher else (value or 0))

    return sorted(records, key=order)


def best_level(record: dict, objective: Objective) -> dict | None:
    """The level the score came from (for the evidence), or None."""
    at = record.get("score_at") or ""
    for level in record.get("levels", []):
        if at == f"C={level['concurrency']}":
            return level
    return None
