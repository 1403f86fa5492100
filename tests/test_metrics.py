"""The bench's metric names live in one place (bundle/verify/metrics.py): the bench table, the gate, the
comparison, the plot, tune and the limit read the catalogue, and none of them spells a metric's key itself
(an AST scan, shown to fail on a planted literal)."""

from __future__ import annotations

import ast
from pathlib import Path

from bundle.verify import bench, metrics, tables
from bundle.tune import runner

ROOT = Path(__file__).resolve().parents[1]
READERS = ("bundle/verify/tables.py", "bundle/verify/plot.py", "bundle/verify/limits.py", "bundle/tune/runner.py",
           "bundle/tune/report.py", "bundle/tune/results.py")


def spelled_keys(source: str) -> list[str]:
    keys = {m.key for m in metrics.METRICS} - {"completed", "duration"}
    tree = ast.parse(source)
    # a dict's key is a name of its own (bench.baseline's `output_throughput` in the config), not a metric read
    dict_keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys if k is not None}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in keys and id(node) not in dict_keys]


def test_the_readers_take_their_metrics_from_the_catalogue():
    assert [k for k, _, _ in tables.BENCH_COLUMNS] == [m.key for m in metrics.COLUMNS]
    assert [k for k, _, _ in bench.GATED] == ["output_throughput", "mean_ttft_ms", "mean_tpot_ms"]
    assert set(runner.KEPT_METRICS) == set(metrics.KEPT) and "accept_length" not in runner.KEPT_METRICS
    found = {path: spelled_keys((ROOT / path).read_text()) for path in READERS}
    assert not any(found.values()), found
    assert spelled_keys('x = level["metrics"]["mean_tpot_ms"]') == ["mean_tpot_ms"]  # the scan sees a planted one


def test_a_typed_level_refuses_a_name_the_catalogue_does_not_have():
    level = bench.LevelResult.of({"concurrency": 1, "status": "ok", "metrics": {"mean_tpot_ms": 9.0}})
    assert level.metric("mean_tpot_ms") == 9.0 and level.metric("output_throughput") is None
    try:
        level.metric("mean_tpot")
    except KeyError as exc:
        assert "not a bench metric" in str(exc)
    else:
        raise AssertionError("a misspelt metric was read as missing")
