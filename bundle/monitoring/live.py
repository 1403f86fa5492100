"""The figures a user looks at first, per server, from two readings of its /metrics a few seconds
apart (SGLang's own series, the same ones the dashboard and the alerts use): generated tok/s, mean
TTFT and TPOT over the interval, queue, running requests, KV cache use, KV transfer speed. For a
terminal or an SSH session, where Grafana is not at hand (`bundle top`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Figures:
    service: str
    tokens_per_s: float | None  # generated tokens over the interval
    ttft_ms: float | None  # mean over the requests finished in the interval
    tpot_ms: float | None
    queue: float | None
    running: float | None
    kv_use: float | None  # 0-1
    kv_transfer_gb_s: float | None  # mean over the transfers in the interval (PD prefill: SGLang records them on the sender)

    def as_dict(self) -> dict:
        return asdict(self)


def _mean_over(before: dict, after: dict, name: str, scale: float = 1.0) -> float | None:
    """sum/count increase of a histogram between two readings; None when nothing was observed."""
    count = after.get(f"{name}_count", 0.0) - before.get(f"{name}_count", 0.0)
    if count <= 0:
        return None
    return (after.get(f"{name}_sum", 0.0) - before.get(f"{name}_sum", 0.0)) / count * scale


def figures(service: str, before: dict[str, float], after: dict[str, float], seconds: float) -> Figures:
    """Two readings ({sample name: value summed over labels}, workers.parse_prometheus) -> figures."""
    generated = after.get("sglang:generation_tokens_total")
    previous = before.get("sglang:generation_tokens_total")
    rate = (generated - previous) / seconds if generated is not None and previous is not None and seconds > 0 else None
    return Figures(
        service=service, tokens_per_s=rate,
        ttft_ms=_mean_over(before, after, "sglang:time_to_first_token_seconds", 1000),
        tpot_ms=_mean_over(before, after, "sglang:request_time_per_output_token_seconds", 1000),
        queue=after.get("sglang:num_queue_reqs"), running=after.get("sglang:num_running_reqs"),
        kv_use=after.get("sglang:token_usage"),
        kv_transfer_gb_s=_mean_over(before, after, "sglang:kv_transfer_speed_gb_s"))
