"""Which bench runs may be compared in percent: only like with like.

Two runs are alike when they share the topology, the kind of run (a GPU host, or the same no-GPU
mode: the CPU engine or the simulator), the target (compose, slurm) and the input and output lengths,
and the method and what ran it (likeness.py: dataset, range ratio, concurrency, prompts, seed, GPUs,
image).
The GPU baseline (the original deployment, 256 in / 256 out, C=1) stands only beside GPU runs of
those lengths. Anything else gets a row saying why there is no comparison, never a percentage: a
CPU engine tabled against the GPU baseline read as a regression of tens of percent."""

from __future__ import annotations

from dataclasses import dataclass

from bundle import modes
from bundle.verify import likeness

# How the baseline was measured (the original deployment's bench_serving run).
BASELINE_LENGTHS = (256, 256)
_KIND_NAMES = {"gpu": "a GPU run"}  # a no-GPU mode's name for itself: its Mode.notes["kind"]


def _mode_name(kind: str) -> str:
    return modes.note(kind, "kind") or kind


@dataclass(frozen=True)
class Shape:
    """What a run measured, as far as comparing it goes."""

    topology: str | None
    kind: str  # "gpu", "engine" or "sim"
    target: str
    lengths: tuple[int | None, int | None]  # (input_len, output_len)

    def describe(self) -> str:
        return (f"{_KIND_NAMES.get(self.kind) or _mode_name(self.kind)} of {self.topology} on {self.target} at "
                f"{self.lengths[0]} in / {self.lengths[1]} out")


def kind(record: dict) -> str:
    """"gpu" or a no-GPU mode's name (`true` under its key is a record of an older driver: the simulator)."""
    value = record.get(modes.record_key())
    return "gpu" if not value else ("sim" if value is True else str(value))


def shape(record: dict) -> Shape:
    config = record.get("config") or {}
    return Shape(record.get("topology"), kind(record), record.get("target") or "compose",
                 (config.get("input_len"), config.get("output_len")))


def unlike(record: dict, other: dict) -> str | None:
    """Why `record` cannot be compared in percent with `other`; None when it can."""
    mine, theirs = shape(record), shape(other)
    differ = [what for what, a, b in (("topology", mine.topology, theirs.topology),
                                       ("kind", mine.kind, theirs.kind), ("target", mine.target, theirs.target),
                                       ("lengths", mine.lengths, theirs.lengths)) if a != b]
    if differ:
        return f"this run is {mine.describe()}; run {other.get('run_id') or '?'} is {theirs.describe()}"
    if method := likeness.differences(record, other):  # the method or what ran it (likeness.py)
        return f"run {other.get('run_id') or '?'} differs: {'; '.join(method)} (then vs now)"
    return None


def unlike_baseline(record: dict) -> str | None:
    """Why `record` cannot be compared with the GPU baseline; None when it can."""
    mine = shape(record)
    if mine.kind != "gpu":
        return (f"this run is {_KIND_NAMES.get(mine.kind) or _mode_name(mine.kind)}; the baseline is a GPU run at "
                f"{BASELINE_LENGTHS[0]} in / {BASELINE_LENGTHS[1]} out")
    if mine.lengths != BASELINE_LENGTHS:
        return (f"this run used {mine.lengths[0]} in / {mine.lengths[1]} out; the baseline was measured at "
                f"{BASELINE_LENGTHS[0]} in / {BASELINE_LENGTHS[1]} out")
    return None


def measured(record: dict) -> bool:
    return record.get("kind", "bench") == "bench" and any(lv.get("metrics") for lv in record.get("levels", []))


def latest_alike(history: list[dict], record: dict) -> dict | None:
    """The latest earlier run like `record` that measured at least one level."""
    for other in reversed(history):
        if other.get("run_id") != record.get("run_id") and measured(other) and unlike(record, other) is None:
            return other
    return None


def latest_unlike(history: list[dict], record: dict) -> dict | None:
    """The latest earlier measured run of the same topology, when it is unlike `record` (the table
    then says why it is not compared)."""
    for other in reversed(history):
        if other.get("run_id") != record.get("run_id") and measured(other) and \
                other.get("topology") == record.get("topology"):
            return other if unlike(record, other) else None
    return None
