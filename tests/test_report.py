"""Reports: JSON lines history, tables against the baseline and the previous run, the PNG plot."""

from __future__ import annotations

import io
from dataclasses import asdict

from rich.console import Console

from bundle.verify import plot, runstore, tables
from bundle.config.loader import load_config
from tests.conftest import require_module

BASELINE = asdict(load_config(None).bench.baseline)


def record(run_id: str, *, topology: str = "tp4", c1: float | None = 20.44, c8: float | None = 48.0,
           tpot: float = 47.065) -> dict:
    def level(c, out):
        if out is None:
            return {"concurrency": c, "status": "timeout", "metrics": None, "failed_requests": None,
                    "reason": "ran out"}
        return {"concurrency": c, "status": "ok", "failed_requests": 0, "reason": None,
                "metrics": {"completed": 4 * c, "output_throughput": out, "total_throughput": out * 1.5,
                            "mean_ttft_ms": 376.775, "median_ttft_ms": 350.0, "mean_tpot_ms": tpot,
                            "median_tpot_ms": tpot, "mean_itl_ms": tpot}}
    return {"kind": "bench", "run_id": run_id, "topology": topology, "label": run_id, "started": "t",
            "config": {"input_len": 256, "output_len": 256}, "levels": [level(1, c1), level(8, c8)]}


def render(table) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(table)
    return console.file.getvalue()


def test_history_appends_and_skips_a_damaged_line(tmp_path):
    path = tmp_path / "bench.jsonl"
    runstore.append_jsonl(path, record("a"))
    with path.open("a") as fh:
        fh.write('{"kind": "bench", "run_id": "half-writ')  # an interrupted write
    runstore.append_jsonl(path, record("b"))
    assert [r["run_id"] for r in runstore.read_jsonl(path)] == ["a", "b"]


def test_previous_run_is_the_latest_like_run_that_measured_something():
    history = [record("a"), record("pd-1", topology="pd"), record("b"), record("lost", c1=None, c8=None)]
    assert runstore.previous_bench(history, record("now"))["run_id"] == "b"
    assert runstore.previous_bench(history, record("now", topology="pd"))["run_id"] == "pd-1"
    assert runstore.previous_bench([], record("now")) is None


def test_comparison_against_the_baseline_and_the_previous_run():
    text = render(tables.comparison_table(record("now"), BASELINE, record("before", c1=10.22, tpot=94.13)))
    # 20.44 tok/s against the original 10.22: +100%; TPOT 47.065 ms against 94.13 ms: -50%.
    baseline_rows = [line for line in text.splitlines() if "original deployment" in line]
    assert any("output_throughput" in r and "10.22" in r and "+100.0%" in r for r in baseline_rows)
    assert any("mean_tpot_ms" in r and "94.13" in r and "-50.0%" in r for r in baseline_rows)
    assert any("mean_ttft_ms" in r and "753.55" in r and "-50.0%" in r for r in baseline_rows)
    previous_rows = [line for line in text.splitlines() if "previous run" in line]
    assert any(" 8 " in r and "output_throughput" in r and "+0.0%" in r for r in previous_rows)


def test_bench_table_shows_every_level_with_its_status():
    text = render(tables.bench_table(record("now", c8=None)))
    assert "20.44" in text and "timeout" in text and "4/0" in text


def test_smoke_table_prints_server_text_literally():
    data = {"ok": False, "topology": "tp4", "front_door": "http://x", "model": "m",
            "steps": [{"name": "answer", "ok": False, "seconds": 0.1, "detail": "expected 'Paris' in '[bold]Lyon'"}]}
    text = render(tables.smoke_table(data))
    assert "[bold]Lyon" in text and "FAIL" in text


def test_plot_is_a_png(tmp_path):
    require_module("matplotlib")
    path = plot.plot_bench(record("now"), tmp_path / "bench.png", baseline=BASELINE,
                             previous=record("before", c1=10.0))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 5000


def test_other_lengths_than_the_baselines_get_no_percentage_and_nothing_to_compare_is_none():
    short = record("now")
    short["config"] = {"input_len": 64, "output_len": 32}
    text = render(tables.comparison_table(short, BASELINE, None))
    assert "no comparison: this run used 64 in / 32 out; the baseline was measured at 256 in / 256 out" in text
    assert "%" not in text
    assert "no comparison" not in render(tables.comparison_table(record("now"), BASELINE, None))
    no_c1 = record("now")
    no_c1["levels"] = no_c1["levels"][1:]
    assert tables.comparison_table(no_c1, BASELINE, None) is None
