"""The bench plot: a PNG of throughput and TPOT per concurrency level, beside the run's JSON line."""

from __future__ import annotations

from pathlib import Path

from bundle import modes
from bundle.verify import comparable, metrics, tables


def plot_bench(record: dict, path: Path, *, baseline: dict | None = None,
               previous: dict | None = None) -> Path | None:
    """Output throughput and mean TPOT per concurrency level (this run, and the previous run and the
    baseline where they are like it).

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
    for ax, (metric, title) in zip(axes, ((m.key, m.plot) for m in metrics.PLOTTED)):
        xs, ys = series(record, metric)
        ax.plot(xs, ys, "o-", label=f"this run ({record.get('label') or record['topology']})")
        if previous and comparable.unlike(record, previous) is None:
            pxs, pys = series(previous, metric)
            ax.plot(pxs, pys, "s--", alpha=0.7, label="previous run")
        base_key = {v: k for k, v in tables.BASELINE_KEYS.items()}.get(metric)
        if baseline and base_key and baseline.get(base_key) is not None and comparable.unlike_baseline(record) is None:
            ax.plot([tables.BASELINE_CONCURRENCY], [baseline[base_key]], "r*", markersize=12,
                    label=baseline.get("label") or "baseline")
        if metric == metrics.TPOT:  # the floor of TPOT (cost_model.py): no run gets below it
            floor = [(lv["concurrency"], lv["limit"]["floor_tpot_ms"]) for lv in record.get("levels", [])
                     if lv.get("limit")]
            if floor:
                cpu = " (CPU figure)" if floor and (record.get("limits") or {}).get("figure") == "cpu" else ""
                ax.plot([c for c, _ in floor], [f for _, f in floor], "g^:", label=f"floor{cpu}")
        ax.set_xscale("log", base=2)
        levels = sorted({lv["concurrency"] for lv in record.get("levels", [])} | {tables.BASELINE_CONCURRENCY})
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.set_xlabel("concurrency")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    simulated = modes.note(tables.mode_kind(record), "plot")
    fig.suptitle(f"{simulated}bench {record['topology']}: {record['config']['input_len']} in / "
                 f"{record['config']['output_len']} out, {record.get('started', '')}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
