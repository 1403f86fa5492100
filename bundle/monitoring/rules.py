"""The alert rules for the failures this stack is known for, as Prometheus rule data.

One source: `alerts(settings)` gives each rule with its PromQL, its `for:` and the runbook anchor
in docs/monitoring.md; `rules_document()` is the rules file Prometheus loads (rendered per launch,
so the thresholds, and the short intervals of a run with no GPU, come from bundle.yaml). Every metric named
here is one the pinned SGLang or smg emits (tests/test_monitoring_contract.py)."""

from __future__ import annotations

from dataclasses import dataclass

from bundle.durations import parse_duration

GROUP = "sglang-bundle"
RUNBOOK = "docs/monitoring.md"


@dataclass(frozen=True)
class Thresholds:
    """What the rules compare against (bundle.yaml's monitoring: section, in the units PromQL uses)."""

    down_for: str = "1m"  # a server, the router or a worker seen by the router
    slow_for: str = "10m"  # a latency or speed past its objective: minutes, not one burst
    ttft_objective_s: float = 3.0
    tpot_objective_s: float = 0.05
    kv_transfer_min_gb_s: float = 5.0
    kv_cache_full_ratio: float = 0.95
    rate_window: str = "5m"  # rate()/histogram windows: at least four scrapes
    restart_window: str = "15m"

    @classmethod
    def of(cls, monitoring, *, fast: bool = False) -> "Thresholds":
        """From the config's monitoring section; `fast` (a run with no GPU, whose servers load in seconds):
        windows of seconds, not minutes."""
        base = cls(down_for=prom_duration(monitoring.down_for), ttft_objective_s=monitoring.ttft_objective_ms / 1000,
                   tpot_objective_s=monitoring.tpot_objective_ms / 1000,
                   kv_transfer_min_gb_s=monitoring.kv_transfer_min_gb_s,
                   kv_cache_full_ratio=monitoring.kv_cache_full_ratio)
        if not fast:
            return base
        return cls(**{**base.__dict__, "down_for": "10s", "slow_for": "1m", "rate_window": "30s",
                      "restart_window": "2m"})


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str  # a template Prometheus fills with the series' labels only ({{ $labels.job }})
    runbook: str  # the anchor of its runbook line in docs/monitoring.md

    def rule(self) -> dict:
        return {"alert": self.name, "expr": self.expr, "for": self.for_,
                "labels": {"severity": self.severity},
                "annotations": {"summary": self.summary, "runbook": f"{RUNBOOK}#{self.runbook}"}}


# Servers (every SGLang server job) and the router, as jobs of the scrape config (scrape.py).
SERVER_SELECTOR = '{role="server"}'


def alerts(t: Thresholds) -> list[Alert]:
    w = t.rate_window
    return [
        Alert("TargetDown", 'up{role=~"server|router"} == 0', t.down_for, "critical",
              "{{ $labels.job }} does not answer Prometheus' scrape (down, hung or paused)", "targetdown"),
        Alert("RouterWorkerUnhealthy", "smg_worker_health == 0", t.down_for, "critical",
              "the router marks worker {{ $labels.worker }} unhealthy: requests no longer reach it",
              "routerworkerunhealthy"),
        Alert("NoHealthyWorker", "sum by (job) (smg_worker_health) == 0", t.down_for, "critical",
              "the router {{ $labels.job }} has no healthy worker: every request fails", "nohealthyworker"),
        Alert("KvTransferSlow",
              f"histogram_quantile(0.5, sum by (job, le) (rate(sglang:kv_transfer_speed_gb_s_bucket[{w}])))"
              f" < {t.kv_transfer_min_gb_s:g}",
              t.slow_for, "warning",
              f"{{{{ $labels.job }}}}: median KV transfer below {t.kv_transfer_min_gb_s:g} GB/s: "
              "the TCP fallback, not cuda_ipc", "kvtransferslow"),
        # The KV path broken while every health check passes (sglang #32652): decode counts each
        # request whose transfer or bootstrap failed, and each request it aborted.
        Alert("KvTransferFailing", f"sum by (job) (increase(sglang:num_transfer_failed_reqs_total[{w}])) > 0",
              t.down_for, "critical",
              "{{ $labels.job }}: KV transfers from prefill fail; requests through the router fail with it",
              "kvtransferfailing"),
        Alert("KvBootstrapFailing", f"sum by (job) (increase(sglang:num_bootstrap_failed_reqs_total[{w}])) > 0",
              t.down_for, "critical",
              "{{ $labels.job }}: KV transfer bootstraps with prefill fail", "kvbootstrapfailing"),
        Alert("RequestsAborted", f"sum by (job) (rate(sglang:num_aborted_requests_total[{w}])) > 0",
              t.slow_for, "warning",
              "{{ $labels.job }} keeps aborting requests", "requestsaborted"),
        Alert("CudaGraphsOff",
              f'max by (job) (max_over_time(sglang:is_cuda_graph{{engine_type!="prefill"}}[{w}])) == 0'
              f" and on (job) sum by (job) (rate(sglang:generation_tokens_total[{w}])) > 0",
              t.slow_for, "warning",
              "{{ $labels.job }} decodes without CUDA graphs (about 10x slower)", "cudagraphsoff"),
        Alert("TtftAboveObjective",
              f"histogram_quantile(0.95, sum by (job, le) (rate(sglang:time_to_first_token_seconds_bucket[{w}])))"
              f" > {t.ttft_objective_s:g}",
              t.slow_for, "warning",
              f"{{{{ $labels.job }}}}: p95 time to first token above the {t.ttft_objective_s:g} s objective",
              "ttftaboveobjective"),
        Alert("TpotAboveObjective",
              "histogram_quantile(0.95, sum by (job, le) "
              f"(rate(sglang:request_time_per_output_token_seconds_bucket[{w}]))) > {t.tpot_objective_s:g}",
              t.slow_for, "warning",
              f"{{{{ $labels.job }}}}: p95 time per output token above the {t.tpot_objective_s:g} s objective",
              "tpotaboveobjective"),
        Alert("QueueGrowing",
              f"sglang:num_queue_reqs > 0 and deriv(sglang:num_queue_reqs[{w}]) > 0",
              t.slow_for, "warning",
              "{{ $labels.job }}: the waiting queue keeps growing", "queuegrowing"),
        Alert("KvCacheNearlyFull", f"sglang:token_usage > {t.kv_cache_full_ratio:g}", t.slow_for, "warning",
              f"{{{{ $labels.job }}}}: KV cache over {t.kv_cache_full_ratio:.0%} full: requests queue or are retracted",
              "kvcachenearlyfull"),
        # A restart is a scrape that fails, then succeeds again: two changes of `up` each.
        Alert("RestartLoop", f'changes(up{{role=~"server|router"}}[{t.restart_window}]) >= 4', "0s", "critical",
              "{{ $labels.job }} went down and came back at least twice in " + t.restart_window, "restartloop"),
    ]


def rules_document(t: Thresholds) -> dict:
    """The rules file (Prometheus' YAML as data)."""
    return {"groups": [{"name": GROUP, "rules": [a.rule() for a in alerts(t)]}]}


def prom_duration(duration: str) -> str:
    """bundle.yaml's duration (90s, 1.5m, 1h30m) as Prometheus spells it: whole seconds."""
    return f"{round(parse_duration(duration, what='monitoring duration'))}s"
