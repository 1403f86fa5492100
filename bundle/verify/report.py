"""Reports are data first (JSON and JSON lines under runs/), rendered second (rich tables, a PNG).

- smoke: one JSON report per run, in that run's folder.
- bench: one JSON line per run appended to runs/<project>/bench.jsonl (the history the next run is
  compared with), a table against the configured baseline and the previous run, and a PNG plot.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

BENCH_HISTORY = "bench.jsonl"
# Width for output that is not a terminal (a log, a pipe, CI): rich would otherwise use 80 columns
# and cut numbers short with an ellipsis.
LOG_WIDTH = 220


def console(*, stderr: bool = False):
    """A rich console for reports: a terminal's own width, else wide enough that nothing is cut."""
    from rich.console import Console

    probe = Console(stderr=stderr)
    return Console(highlight=False, soft_wrap=True, stderr=stderr,
                   width=None if probe.is_terminal else LOG_WIDTH)

# (key in a level's metrics, column title, higher is better?) in the order the tables show them.
BENCH_COLUMNS = [
    ("output_throughput", "out tok/s", True),
    ("total_throughput", "all tok/s", True),
    ("mean_ttft_ms", "TTFT ms", False),
    ("median_ttft_ms", "TTFT p50", False),
    ("mean_tpot_ms", "TPOT ms", False),
    ("median_tpot_ms", "TPOT p50", False),
    ("mean_itl_ms", "ITL ms", False),
    # Speculative decoding's mean acceptance length (accepted drafts + the bonus token per verify), as
    # bench_serving reads it from /server_info (internal_states[0].avg_spec_accept_length) at the end of
    # the level: a gain from speculation is only real with its acceptance. "-" without speculation.
    ("accept_length", "accept len", True),
]
# How the baseline was measured (the original deployment's bench_serving run; README, "After a driver
# upgrade"): other lengths are not comparable with it, and the comparison says so.
BASELINE_METHOD = {"input_len": 256, "output_len": 256}
# config bench.baseline key -> metrics key: the baseline was measured at concurrency 1.
BASELINE_KEYS = {"output_throughput": "output_throughput", "tpot_ms": "mean_tpot_ms",
                 "ttft_ms": "mean_ttft_ms"}
BASELINE_CONCURRENCY = 1


# ---- JSON ------------------------------------------------------------------------------------
def write_json(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path


def append_jsonl(path: Path, record: dict) -> Path:
    """Append one line; the line is built first, so a crash never leaves half a record."""
    line = json.dumps(record, sort_keys=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as fh:
        # An earlier write cut short left no newline: start on a fresh line, or this record would
        # be glued to the damaged one and lost with it.
        fh.seek(0, 2)
        if fh.tell() > 0:
            fh.seek(-1, 2)
            if fh.read(1) != b"\n":
                line = "\n" + line
        fh.write(line.encode())
    return path


def parse_jsonl(text: str) -> list[dict]:
    """Every JSON object line; a damaged line (an interrupted write) is skipped, not fatal."""
    records = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def read_jsonl(path: Path) -> list[dict]:
    return parse_jsonl(path.read_text()) if path.is_file() else []


def previous_bench(history: list[dict], *, topology: str) -> dict | None:
    """The latest earlier run of the same topology that measured at least one level."""
    for record in reversed(history):
        if record.get("topology") == topology and any(
                lv.get("metrics") for lv in record.get("levels", [])):
            return record
    return None


# ---- smoke -------------------------------------------------------------------------------------
def smoke_table(report: dict) -> Table:
    verdict = "[green]PASS[/]" if report["ok"] else "[red]FAIL[/]"
    table = Table(title=f"smoke {report['topology']} at {report['front_door']} ({report['model']}): {verdict}",
                  title_justify="left")
    table.add_column("step")
    table.add_column("result")
    table.add_column("s", justify="right")
    table.add_column("detail", overflow="fold")
    for step in report["steps"]:
        mark = "[green]ok[/]" if step["ok"] else "[red]FAIL[/]"
        table.add_row(step["name"], mark, f"{step['seconds']:.2f}", _plain(step["detail"]))
    return table


def _plain(text: str) -> str:
    """Text from servers goes into rich tables literally (no markup interpretation)."""
    return str(text).replace("[", "\\[")


# ---- bench -------------------------------------------------------------------------------------
def _fmt(value) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _change(now, then, higher_is_better: bool) -> str:
    """Relative change, coloured green when better and red when worse."""
    if now is None or then in (None, 0):
        return "-"
    pct = (now - then) / then * 100.0
    better = pct > 0 if higher_is_better else pct < 0
    colour = "green" if better else ("red" if abs(pct) >= 0.05 else "white")
    return f"[{colour}]{pct:+.1f}%[/]"


def _level(record: dict | None, concurrency: int) -> dict | None:
    for level in (record or {}).get("levels", []):
        if level.get("concurrency") == concurrency:
            return level
    return None


ENGINE_REHEARSAL = "CPU engine rehearsal"


def rehearsal_kind(record: dict) -> str | None:
    """None (a GPU run), "engine" or "sim" (True: a record of an older driver, the simulator)."""
    value = record.get("rehearsal")
    return None if not value else ("sim" if value is True else str(value))


def bench_table(record: dict) -> Table:
    """This run's levels: every metric, requests completed/failed, and how each level ended."""
    simulated = {"engine": f" ({ENGINE_REHEARSAL}: real SGLang on CPU, a 1 M-parameter model; not a GPU measurement)",
                 "sim": " (REHEARSAL: simulated workers; the numbers are the simulator's settings)",
                 }.get(rehearsal_kind(record), "")
    table = Table(title=f"bench {record['topology']} ({record.get('label') or 'no label'}): "
                        f"{record['config']['input_len']} in / {record['config']['output_len']} out{simulated}",
                  title_justify="left")
    # Numbers are never cut: a column too narrow folds its text onto a second line instead.
    table.add_column("C", justify="right", overflow="fold")
    table.add_column("status", overflow="fold")
    table.add_column("ok/fail", justify="right", overflow="fold")
    for _key, title, _ in BENCH_COLUMNS:
        table.add_column(title, justify="right", overflow="fold")
    for level in record["levels"]:
        m = level.get("metrics") or {}
        status = level["status"]
        colour = {"ok": "green", "timeout": "yellow"}.get(status, "red")
        unsent = level.get("unsent") or 0
        done = f"{m.get('completed', '-')}/{level.get('failed_requests', '-')}" + (f" (+{unsent} unsent)" if unsent else "")
        table.add_row(str(level["concurrency"]), f"[{colour}]{status}[/]", done,
                      *(_fmt(m.get(key)) for key, _, _ in BENCH_COLUMNS))
    return table


def comparison_table(record: dict, baseline: dict | None, previous: dict | None, *,
                     previous_name: str = "previous run") -> Table | None:
    """This run against the recorded baseline (C=1 only) and against the previous run (each level);
    None when there is nothing to compare with."""
    method = {k: record["config"].get(k) for k in BASELINE_METHOD}
    note = "" if method == BASELINE_METHOD else (
        f" (the baseline was measured at {BASELINE_METHOD['input_len']} in / {BASELINE_METHOD['output_len']}"
        f" out; this run used {method['input_len']} / {method['output_len']}: not like for like)")
    if rehearsal_kind(record) == "engine":
        note += f" (a {ENGINE_REHEARSAL}: not comparable with a GPU baseline)"
    elif rehearsal_kind(record):
        note += " (a rehearsal against simulated workers: not comparable with a GPU baseline)"
    table = Table(title="compared with" + note, title_justify="left")
    for column in ("against", "C", "metric", "then", "now", "change"):
        table.add_column(column, justify="right" if column in ("C", "then", "now", "change") else "left",
                         overflow="fold")
    base_level = _level(record, BASELINE_CONCURRENCY)
    if baseline and base_level and base_level.get("metrics"):
        for base_key, metric in BASELINE_KEYS.items():
            if baseline.get(base_key) is None:
                continue
            higher = {k: h for k, _, h in BENCH_COLUMNS}[metric]
            now = base_level["metrics"].get(metric)
            table.add_row(_plain(baseline.get("label") or "baseline"), str(BASELINE_CONCURRENCY), metric,
                          _fmt(float(baseline[base_key])), _fmt(now), _change(now, baseline[base_key], higher))
    if previous:
        label = f"{previous_name} {previous.get('run_id', '')}".strip()
        if previous.get("label"):  # e.g. "tune defaults": the run `bundle tune` measured the config as it is
            label += f" ({_plain(previous['label'])})"
        for level in record["levels"]:
            then_level = _level(previous, level["concurrency"])
            if not (level.get("metrics") and then_level and then_level.get("metrics")):
                continue
            for metric in ("output_throughput", "mean_ttft_ms", "mean_tpot_ms"):
                higher = {k: h for k, _, h in BENCH_COLUMNS}[metric]
                now, then = level["metrics"].get(metric), then_level["metrics"].get(metric)
                table.add_row(label, str(level["concurrency"]), metric, _fmt(then), _fmt(now),
                              _change(now, then, higher))
    return table if table.row_count else None


def plot_bench(record: dict, path: Path, *, baseline: dict | None = None,
               previous: dict | None = None) -> Path | None:
    """Output throughput and mean TPOT per concurrency level (this run, previous run, baseline).

    Returns None when matplotlib is not installed (the `plot` extra): the data is in the JSON line.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display on servers
        import matplotlib.pyplot as plt
    except ImportError:
        return None

    def series(rec, metric):
        pts = [(lv["concurrency"], lv["metrics"].get(metric)) for lv in (rec or {}).get("levels", [])
               if lv.get("metrics") and lv["metrics"].get(metric) is not None]
        return [p[0] for p in pts], [p[1] for p in pts]

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric, title in ((axes[0], "output_throughput", "output throughput (tok/s)"),
                              (axes[1], "mean_tpot_ms", "mean TPOT (ms)")):
        xs, ys = series(record, metric)
        ax.plot(xs, ys, "o-", label=f"this run ({record.get('label') or record['topology']})")
        if previous:
            pxs, pys = series(previous, metric)
            ax.plot(pxs, pys, "s--", alpha=0.7, label="previous run")
        base_key = {v: k for k, v in BASELINE_KEYS.items()}.get(metric)
        if baseline and base_key and baseline.get(base_key) is not None:
            ax.plot([BASELINE_CONCURRENCY], [baseline[base_key]], "r*", markersize=12,
                    label=baseline.get("label") or "baseline")
        ax.set_xscale("log", base=2)
        levels = sorted({lv["concurrency"] for lv in record.get("levels", [])} | {BASELINE_CONCURRENCY})
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.set_xlabel("concurrency")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    simulated = {"engine": f"{ENGINE_REHEARSAL} (real SGLang on CPU, not a GPU measurement): ",
                 "sim": "REHEARSAL (simulated workers, not a GPU measurement): "}.get(rehearsal_kind(record), "")
    fig.suptitle(f"{simulated}bench {record['topology']}: {record['config']['input_len']} in / "
                 f"{record['config']['output_len']} out, {record.get('started', '')}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ---- soak and gate ------------------------------------------------------------------------------
def soak_table(record: dict) -> Table:
    """A soak: requests and errors, and each latency's first window against its last."""
    s = record["soak"]
    verdict = "[green]PASS[/]" if record["ok"] else "[red]FAIL[/]"
    simulated = {"engine": f" ({ENGINE_REHEARSAL})", "sim": " (REHEARSAL: simulated workers)"}.get(
        rehearsal_kind(record), "")
    title = (f"soak {record['topology']} at C={record['config']['concurrency'][0]} for {s['seconds']:.0f} s "
             f"({len(record['rounds'])} rounds, {s.get('traffic_s', 0):.0f} s of traffic"
             + (f" after bench_serving's {s['start_up_s']:.0f} s start" if s.get("start_up_s") else "")
             + f"): {s['completed']} "
             f"completed, {s['failed']} failed: {verdict}{simulated}")
    table = Table(title=title, title_justify="left")
    for column in ("metric", f"first {s['window_s']:g} s", f"last {s['window_s']:g} s", "drift"):
        table.add_column(column, justify="left" if column == "metric" else "right", overflow="fold")
    first, last = s["first_window"], s["last_window"]
    table.add_row("requests", _fmt(first["requests"]), _fmt(last["requests"]), "")
    for key, name in (("mean_latency_ms", "latency ms"), ("mean_ttft_ms", "TTFT ms"), ("mean_tpot_ms", "TPOT ms")):
        drift = s["drift"].get(key.replace("mean_", "").replace("_ms", "_pct"))
        table.add_row(name, _fmt(first.get(key)), _fmt(last.get(key)), "-" if drift is None else f"{drift:+.1f}%")
    return table


def gate_lines(result: dict) -> list[str]:
    """What the gate compared and found, one line each (plain text)."""
    head = (f"gate {result['pct']:g}% against run {result['against']}: "
            + ("PASS" if result["ok"] else "FAIL"))
    return [head] + [f"  {line}" for line in (result["regressions"] or result["compared"])]
