"""Contract: every metric name in every dashboard query and alert expression is one the pinned
SGLang or smg emits (read from their installed source and binary, tests/metric_catalogue.py), and
the simulator's /metrics uses only SGLang's names for what it simulates. A misspelled metric fails
naming the panel (or alert) and the metric. (smg's own Helm dashboard queries smg_requests_total
and smg_active_workers, which its code never emits: the failure this catches.)"""

from __future__ import annotations

import pytest

from bundle.config.loader import load_config
from bundle.monitoring import dashboards
from bundle.monitoring.rules import Thresholds, alerts
from tests import metric_catalogue as catalogue

pytestmark = pytest.mark.contract


def _dashboard_queries(board: dict) -> list[tuple[str, str]]:
    return [(panel["title"], target["expr"]) for panel in board["panels"] for target in panel.get("targets", [])]


def _unknown(queries) -> list[str]:
    return [f"{where}: {name}" for where, expr in queries for name in sorted(catalogue.selected_names(expr))
            if not catalogue.emitted(name)]


def test_the_catalogue_reads_the_pinned_versions():
    sglang = catalogue.exposed_names(catalogue.sglang_metrics())
    # Names the issue quotes from SGLang 0.5.23's source, and smg 1.13.0's binary.
    assert {"sglang:kv_transfer_speed_gb_s_bucket", "sglang:is_cuda_graph", "sglang:gen_throughput",
            "sglang:kv_used_tokens", "sglang:cache_hit_rate", "sglang:http_requests_total",
            "sglang:inter_token_latency_seconds_bucket"} <= sglang
    assert len(catalogue.sglang_metrics()) > 150
    assert catalogue.smg_emits("smg_worker_health") and catalogue.smg_emits("smg_router_requests_total")
    # What smg's Helm dashboard queries and the code never emits:
    assert not catalogue.smg_emits("smg_requests_total") and not catalogue.smg_emits("smg_active_workers")
    assert not catalogue.emitted("sglang:num_requests_running")


def test_every_dashboard_query_names_metrics_the_pinned_versions_emit():
    queries = _dashboard_queries(dashboards.dashboard())
    assert len(queries) >= 20
    assert _unknown(queries) == []


def test_every_alert_names_metrics_the_pinned_versions_emit():
    rules = alerts(Thresholds.of(load_config(None).monitoring))
    assert _unknown((f"alert {a.name}", a.expr) for a in rules) == []


def test_a_dashboard_query_naming_a_metric_sglang_does_not_emit_fails_naming_the_panel():
    board = dashboards.dashboard()
    panel = next(p for p in board["panels"] if p["title"] == "Queued and running requests")
    panel["targets"][0]["expr"] = "sum by (job) (sglang:num_queue_requests)"  # the real name: num_queue_reqs
    assert _unknown(_dashboard_queries(board)) == ["Queued and running requests: sglang:num_queue_requests"]


def test_the_simulator_exposes_only_sglang_names_for_what_it_simulates():
    from prometheus_client.parser import text_string_to_metric_families

    from bundle.rehearsal.simulator.metrics import Counters, ServingMetrics

    sglang = set()
    for role in ("prefill", "decode"):
        serving = ServingMetrics("dsv4", role, cuda_graph=True)
        serving.request_done(ttft_s=0.1, e2e_s=0.5, output_tokens=5)
        serving.kv_sent(gb_s=20, latency_ms=3)
        serving.kv_received(seconds=0.01)
        counters = Counters("dsv4", role)
        counters.request_done(streaming=False, prompt_tokens=3, completion_tokens=5)
        text = counters.render() + serving.render()
        samples = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
        sglang |= {n for n in samples if n.startswith("sglang:")}
    assert {"sglang:kv_transfer_speed_gb_s_bucket", "sglang:time_to_first_token_seconds_bucket",
            "sglang:per_stage_req_latency_seconds_count"} <= sglang
    known = catalogue.exposed_names(catalogue.sglang_metrics())
    # prometheus_client adds _created to counters and histograms, as it does in SGLang.
    assert {n for n in sglang if not n.endswith("_created")} - known == set()
