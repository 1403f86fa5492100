"""Reports rendered for people: rich tables of a smoke, a bench (against the baseline and the previous
run), a soak, and the gate's lines. The data they show is the run store's (runstore.py)."""

from __future__ import annotations

from rich.table import Table

from bundle import modes
from bundle.verify import comparable, metrics

# (key in a level's metrics, column title, higher is better?) in the order the tables show them: the
# catalogue's columns (bundle/verify/metrics.py).
BENCH_COLUMNS = [(m.key, m.title, m.higher_is_better) for m in metrics.COLUMNS]
# config bench.baseline key -> metrics key: the baseline was measured at concurrency 1.
BASELINE_KEYS = {"output_throughput": metrics.THROUGHPUT, "tpot_ms": metrics.TPOT, "ttft_ms": metrics.TTFT}
BASELINE_CONCURRENCY = 1


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


def mode_kind(record: dict) -> str | None:
    """None (a GPU run), else the no-GPU mode's name (True: a record of an older driver, the simulator)."""
    value = comparable.kind(record)
    return None if value == "gpu" else value


def bench_table(record: dict) -> Table:
    """This run's levels: every metric, requests completed/failed, and how each level ended."""
    simulated = modes.note(mode_kind(record), "table")
    table = Table(title=f"bench {record['topology']} ({record.get('label') or 'no label'}): "
                        f"{record['config']['input_len']} in / {record['config']['output_len']} out{simulated}",
                  title_justify="left")
    # Numbers are never cut: a column too narrow folds its text onto a second line instead.
    table.add_column("C", justify="right", overflow="fold")
    table.add_column("status", overflow="fold")
    table.add_column("ok/fail", justify="right", overflow="fold")
    for _key, title, _ in BENCH_COLUMNS:
        table.add_column(title, justify="right", overflow="fold")
    cpu = (record.get("limits") or {}).get("figure") == "cpu"
    for title in LIMIT_COLUMNS:  # against the cost model (bundle/verify/cost_model.py)
        table.add_column(title + (" (CPU)" if cpu and title == "MBU" else ""), justify="right", overflow="fold")
    for level in record["levels"]:
        m = level.get("metrics") or {}
        status = level["status"]
        colour = {"ok": "green", "timeout": "yellow"}.get(status, "red")
        unsent = level.get("unsent") or 0
        done = f"{m.get('completed', '-')}/{level.get('failed_requests', '-')}" + (f" (+{unsent} unsent)" if unsent else "")
        table.add_row(str(level["concurrency"]), f"[{colour}]{status}[/]", done,
                      *(_fmt(m.get(key)) for key, _, _ in BENCH_COLUMNS), *_limit_cells(level.get("limit")))
    return table


LIMIT_COLUMNS = ("MBU", "MFU", "floor ms", "x floor")


def _limit_cells(limit: dict | None) -> tuple[str, ...]:
    """MBU and MFU in percent, the bandwidth floor of TPOT and measured/floor; "-" when not scored."""
    if not limit:
        return ("-",) * len(LIMIT_COLUMNS)
    colour = {"near": "green", "short": "yellow"}.get(limit["verdict"]["band"], "red")
    mfu = "-" if limit.get("mfu") is None else f"{limit['mfu'] * 100:.2f}%"
    return (f"[{colour}]{limit['mbu'] * 100:.1f}%[/]", mfu, f"{limit['floor_tpot_ms']:.3f}", f"{limit['ratio']:.1f}")


def _no_comparison(table: Table, against: str, reason: str) -> None:
    table.add_row(against, "", f"no comparison: {reason}", "", "", "")


def comparison_table(record: dict, baseline: dict | None, previous: dict | None, *,
                     previous_name: str = "previous run", unlike_previous: dict | None = None) -> Table | None:
    """This run against the recorded baseline (C=1 only) and against the previous run (each level),
    in percent only where the runs are alike (bundle/verify/comparable.py); otherwise a row says why
    there is no comparison. `unlike_previous`: the last run of the topology when none was alike.
    None when there is nothing to compare with."""
    table = Table(title="compared with", title_justify="left")
    for column in ("against", "C", "metric", "then", "now", "change"):
        table.add_column(column, justify="right" if column in ("C", "then", "now", "change") else "left",
                         overflow="fold")
    base_level = _level(record, BASELINE_CONCURRENCY)
    if baseline and base_level and base_level.get("metrics"):
        label = _plain(baseline.get("label") or "baseline")
        if reason := comparable.unlike_baseline(record):
            _no_comparison(table, label, reason)
        else:
            for base_key, metric in BASELINE_KEYS.items():
                if baseline.get(base_key) is None:
                    continue
                higher = metrics.higher_is_better(metric)
                now = base_level["metrics"].get(metric)
                table.add_row(label, str(BASELINE_CONCURRENCY), metric,
                              _fmt(float(baseline[base_key])), _fmt(now), _change(now, baseline[base_key], higher))
    for other in (previous, unlike_previous):
        if not other:
            continue
        label = f"{previous_name} {other.get('run_id', '')}".strip()
        if other.get("label"):  # e.g. "tune defaults": the run `bundle tune` measured the config as it is
            label += f" ({_plain(other['label'])})"
        if reason := comparable.unlike(record, other):
            _no_comparison(table, label, reason)
            continue
        for level in record["levels"]:
            then_level = _level(other, level["concurrency"])
            if not (level.get("metrics") and then_level and then_level.get("metrics")):
                continue
            for metric in (m.key for m in metrics.COMPARED):
                higher = metrics.higher_is_better(metric)
                now, then = level["metrics"].get(metric), then_level["metrics"].get(metric)
                table.add_row(label, str(level["concurrency"]), metric, _fmt(then), _fmt(now),
                              _change(now, then, higher))
    return table if table.row_count else None


# ---- soak and gate ------------------------------------------------------------------------------
def soak_table(record: dict) -> Table:
    """A soak: requests and errors, and each latency's first window against its last."""
    s = record["soak"]
    verdict = "[green]PASS[/]" if record["ok"] else "[red]FAIL[/]"
    simulated = modes.note(mode_kind(record), "table short")
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
    for key, name in (("mean_latency_ms", "latency ms"), (metrics.TTFT, "TTFT ms"), (metrics.TPOT, "TPOT ms")):
        drift = s["drift"].get(key.replace("mean_", "").replace("_ms", "_pct"))
        table.add_row(name, _fmt(first.get(key)), _fmt(last.get(key)), "-" if drift is None else f"{drift:+.1f}%")
    return table


def gate_lines(result) -> list[str]:
    """What the gate compared and found, one line each (plain text); `result` a bench.Gated."""
    head = f"gate {result.pct:g}% against run {result.against}: " + ("PASS" if result.ok else "FAIL")
    return [head] + [f"  {line}" for line in (result.regressions or result.compared)]
