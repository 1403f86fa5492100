"""`bundle top`'s figures from two readings of real /metrics text: the simulator's own exposition
(SGLang's names, rendered by prometheus_client) read by the driver's parser."""

from __future__ import annotations

import pytest

from bundle.monitoring.live import figures
from bundle.rehearsal.simulator.metrics import Counters, ServingMetrics
from bundle.stack.workers import parse_prometheus


def _text(counters, serving):
    return parse_prometheus(counters.render() + serving.render())


def test_rates_and_means_cover_only_the_interval_between_readings():
    # prefill: the sender records the KV transfer in SGLang 0.5.23 (and so in the simulator)
    counters, serving = Counters("m", "prefill"), ServingMetrics("m", "prefill", cuda_graph=True)
    # Before the first reading: one slow request that must not count in the interval's means.
    counters.request_done(streaming=False, prompt_tokens=5, completion_tokens=11)
    serving.request_done(ttft_s=2.0, e2e_s=3.0, output_tokens=11)
    before = _text(counters, serving)
    for _ in range(2):  # in the interval: two requests, TTFT 100 ms, TPOT 20 ms, 51 tokens each
        counters.request_done(streaming=False, prompt_tokens=5, completion_tokens=51)
        serving.request_done(ttft_s=0.1, e2e_s=0.1 + 50 * 0.02, output_tokens=51)
        serving.kv_sent(gb_s=1.5, latency_ms=4)
    serving.set_load(running=3, queued=2, token_usage=0.25)
    got = figures("prefill", before, _text(counters, serving), seconds=2.0)
    assert got.tokens_per_s == pytest.approx(51.0)
    assert got.ttft_ms == pytest.approx(100.0)
    assert got.tpot_ms == pytest.approx(20.0)
    assert (got.queue, got.running, got.kv_use) == (2, 3, 0.25)
    assert got.kv_transfer_gb_s == pytest.approx(1.5)


def test_a_server_that_did_nothing_shows_no_latency_rather_than_zero():
    counters, serving = Counters("m", "prefill"), ServingMetrics("m", "prefill", cuda_graph=True)
    reading = _text(counters, serving)
    got = figures("prefill", reading, reading, seconds=3.0)
    assert got.ttft_ms is None and got.tpot_ms is None and got.kv_transfer_gb_s is None
    assert got.tokens_per_s is None  # no generation counter yet: not "0 tok/s"
