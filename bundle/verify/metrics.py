"""The metrics of a bench level, in one place: their names as bench_serving writes them, their column
titles, which way is better, and which of them the gate, the comparison, the plot and tune read. The
bench's tables, the regression gate, the plot and tune's kept figures all read this catalogue."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    key: str  # the name in a level's `metrics` (bench_serving's, or the bundle's where it derives one)
    title: str  # the bench table's column
    higher_is_better: bool
    word: str  # how a message names it ("throughput")
    column: bool = True  # in the bench table
    gated: bool = False  # the regression gate compares it
    compared: bool = False  # the comparison table's per-level rows
    plot: str | None = None  # the plot's panel title
    kept: bool = True  # tune keeps it from each candidate's run


METRICS: tuple[Metric, ...] = (
    Metric("output_throughput", "out tok/s", True, "throughput", gated=True, compared=True,
           plot="output throughput (tok/s)"),
    Metric("total_throughput", "all tok/s", True, "total throughput"),
    Metric("mean_ttft_ms", "TTFT ms", False, "TTFT", gated=True, compared=True),
    Metric("median_ttft_ms", "TTFT p50", False, "median TTFT"),
    Metric("mean_tpot_ms", "TPOT ms", False, "TPOT", gated=True, compared=True, plot="mean TPOT (ms)"),
    Metric("median_tpot_ms", "TPOT p50", False, "median TPOT"),
    Metric("mean_itl_ms", "ITL ms", False, "ITL"),
    # Speculative decoding's mean acceptance length (accepted drafts + the bonus token per verify), as
    # bench_serving reads it from /server_info (internal_states[0].avg_spec_accept_length) at the end of
    # the level: a gain from speculation is only real with its acceptance. "-" without speculation.
    Metric("accept_length", "accept len", True, "acceptance length", kept=False),
    Metric("completed", "completed", True, "completed requests", column=False),
    Metric("duration", "duration s", False, "duration", column=False),
)
BY_KEY = {m.key: m for m in METRICS}
COLUMNS = tuple(m for m in METRICS if m.column)
GATED = tuple(m for m in METRICS if m.gated)  # in the order the gate reports them: throughput, TTFT, TPOT
COMPARED = tuple(m for m in METRICS if m.compared)
PLOTTED = tuple(m for m in METRICS if m.plot)
KEPT = tuple(m.key for m in METRICS if m.kept)
THROUGHPUT, TPOT, TTFT, ACCEPT_LENGTH = "output_throughput", "mean_tpot_ms", "mean_ttft_ms", "accept_length"


def higher_is_better(key: str) -> bool:
    return BY_KEY[key].higher_is_better
