"""Counters the simulator exposes on /metrics in Prometheus text format, under SGLang's own metric
names (sglang:num_requests_total, ...) so the driver reads a rehearsal and a GPU host alike. Health
checks are not counted (SGLang marks them log_metrics=False). The sglang_simulator:* series exist
only here: PD bootstrap rooms seen by prefill and served by decode."""

from __future__ import annotations

import threading
from collections import defaultdict


class Counters:
    def __init__(self, model_name: str, role: str):
        self._lock = threading.Lock()
        self._values: dict[tuple[str, tuple], float] = defaultdict(float)
        self.model_name = model_name
        self.role = role

    def add(self, name: str, value: float = 1.0, **labels) -> None:
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            self._values[key] += value

    def get(self, name: str, **labels) -> float:
        with self._lock:
            return sum(v for (n, lab), v in self._values.items()
                       if n == name and all((k, str(val)) in lab for k, val in labels.items()))

    def request_done(self, *, streaming: bool, prompt_tokens: int, completion_tokens: int) -> None:
        s = "true" if streaming else "false"
        self.add("sglang:num_requests_total", is_streaming=s)
        self.add("sglang:prompt_tokens_total", prompt_tokens, is_streaming=s)
        self.add("sglang:generation_tokens_total", completion_tokens, is_streaming=s)

    def render(self) -> str:
        lines, seen = [], set()
        with self._lock:
            items = sorted(self._values.items())
        for (name, labels), value in items:
            if name not in seen:
                seen.add(name)
                lines.append(f"# TYPE {name} counter")
            all_labels = (("model_name", self.model_name),) + labels
            text = ",".join(f'{k}="{v}"' for k, v in all_labels)
            lines.append(f"{name}{{{text}}} {value}")
        return "\n".join(lines) + "\n"


# SGLang 0.5.23's default buckets (observability/metrics_collector.py), so quantiles read alike.
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
               0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0)
KV_SPEED_BUCKETS = (0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400)
KV_LATENCY_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
STAGE_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 50, 100)
# SGLang's RequestStage for "this request's KV cache has arrived on decode".
DECODE_TRANSFERRED_STAGE = "decode_transferred"


class ServingMetrics:
    """The scheduler's gauges and the per-request histograms SGLang exports, under its names and
    labels (model_name, engine_type, tp_rank, pp_rank, moe_ep_rank), for what the simulator
    simulates: queue and running requests, KV use, CUDA graphs, TTFT/TPOT/ITL, the PD KV transfer.
    prometheus_client renders them, as in SGLang."""

    def __init__(self, model_name: str, role: str, *, cuda_graph: bool):
        from prometheus_client import CollectorRegistry, Gauge, Histogram

        engine_type = {"prefill": "prefill", "decode": "decode"}.get(role, "unified")
        self.labels = {"model_name": model_name, "engine_type": engine_type, "tp_rank": "0", "pp_rank": "0",
                       "moe_ep_rank": "0"}
        self.registry = CollectorRegistry()
        names = list(self.labels)

        def gauge(name, doc):
            return Gauge(name, doc, names, registry=self.registry, multiprocess_mode="mostrecent").labels(**self.labels)

        def histogram(name, doc, buckets):
            return Histogram(name, doc, names, buckets=buckets, registry=self.registry).labels(**self.labels)

        self.running = gauge("sglang:num_running_reqs", "The number of running requests.")
        self.queued = gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
        self.token_usage = gauge("sglang:token_usage", "The token usage.")
        self.cache_hit_rate = gauge("sglang:cache_hit_rate", "The prefix cache hit rate.")
        self.gen_throughput = gauge("sglang:gen_throughput", "The generation throughput (token/s).")
        self.is_cuda_graph = gauge("sglang:is_cuda_graph", "Whether the batch is using CUDA graph.")
        self.ttft = histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              TTFT_BUCKETS)
        self.itl = histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                             ITL_BUCKETS)
        self.tpot = histogram("sglang:request_time_per_output_token_seconds",
                              "Histogram of time per output token in seconds.", ITL_BUCKETS)
        self.e2e = histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in "
                             "seconds", TTFT_BUCKETS)
        # The PD KV transfer where SGLang 0.5.23 records it (read off the real CPU engine's pd): the
        # sender, prefill, observes each transfer's speed and latency (disaggregation/prefill.py);
        # decode observes the request stage "decode_transferred" once a request's KV has arrived
        # (observability/req_time_stats.py). A unified server moves no KV and shows neither.
        self.kv_speed = self.kv_latency = self.decode_transferred = None
        if engine_type == "prefill":
            self.kv_speed = histogram("sglang:kv_transfer_speed_gb_s",
                                      "Histogram of KV cache transfer speed in GB/s.", KV_SPEED_BUCKETS)
            self.kv_latency = histogram("sglang:kv_transfer_latency_ms",
                                        "Histogram of KV cache transfer latency in ms.", KV_LATENCY_BUCKETS)
        if engine_type == "decode":
            self.decode_transferred = Histogram(
                "sglang:per_stage_req_latency_seconds", "The latency of each stage of requests.",
                [*names, "stage"], buckets=STAGE_BUCKETS, registry=self.registry,
            ).labels(**self.labels, stage=DECODE_TRANSFERRED_STAGE)
        self._cuda_graph = cuda_graph

    def set_load(self, *, running: int, queued: int, token_usage: float) -> None:
        self.running.set(running)
        self.queued.set(queued)
        self.token_usage.set(token_usage)

    def decode_step(self) -> None:
        """A decode batch ran: in a CUDA graph unless the server was started with --disable-cuda-graph."""
        self.is_cuda_graph.set(1 if self._cuda_graph else 0)

    def request_done(self, *, ttft_s: float | None, e2e_s: float, output_tokens: int) -> None:
        if ttft_s is not None:
            self.ttft.observe(ttft_s)
        self.e2e.observe(e2e_s)
        if output_tokens > 1 and ttft_s is not None:
            per_token = (e2e_s - ttft_s) / (output_tokens - 1)
            self.tpot.observe(per_token)
            self.itl.observe(per_token)
            self.gen_throughput.set(1 / per_token if per_token > 0 else 0)

    def kv_sent(self, *, gb_s: float, latency_ms: float) -> None:
        """Prefill: one request's KV cache handed to decode."""
        if self.kv_speed is not None:
            self.kv_speed.observe(gb_s)
            self.kv_latency.observe(latency_ms)

    def kv_received(self, *, seconds: float) -> None:
        """Decode: one request's KV cache arrived, `seconds` after it was asked for."""
        if self.decode_transferred is not None:
            self.decode_transferred.observe(seconds)

    def render(self) -> str:
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode()
