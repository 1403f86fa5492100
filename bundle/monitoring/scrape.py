"""Prometheus' configuration for one rendered topology: a job per SGLang server and one for the
router, all reached by service name on the topology's compose network (nothing is published to
the host), plus NVIDIA's DCGM exporter on a GPU host. No credential is ever written here: SGLang
serves /metrics without the API key, and smg's exporter is a separate, unauthenticated port."""

from __future__ import annotations

from bundle.durations import parse_duration
from bundle.monitoring.rules import prom_duration

# smg 1.13.0's --prometheus-port default; the router's compose command sets it explicitly.
ROUTER_METRICS_PORT = 29000
DCGM_SERVICE, DCGM_PORT = "dcgm-exporter", 9400
RULES_PATH = "rules/alerts.yml"  # beside prometheus.yml (relative paths are read from its folder)


def scrape_config(topology, *, worker_port: int, scrape_interval: str, gpu_host: bool,
                  active: set[str] | None = None) -> dict:
    """prometheus.yml as data. `active`: the services `up` starts (dp's optional replicas)."""
    interval = prom_duration(scrape_interval)
    half = _half(scrape_interval)
    jobs = []
    for service in topology.servers:
        if active is None or service.name in active:
            jobs.append(_job(service.name, f"{service.name}:{worker_port}", "server"))
    if topology.router is not None:
        jobs.append(_job(topology.router.name, f"{topology.router.name}:{ROUTER_METRICS_PORT}", "router"))
    if gpu_host:
        jobs.append(_job("dcgm", f"{DCGM_SERVICE}:{DCGM_PORT}", "gpu"))
    return {
        # A frozen server must read as down, and an alert on it fire, within its rule's `for:` plus two
        # scrape intervals at worst: the next scrape (up to one interval away), a timeout of half an
        # interval (SGLang and smg answer /metrics in milliseconds), then the next rule evaluation (half
        # an interval away at most). With Prometheus' usual evaluation_interval = scrape_timeout =
        # scrape_interval the worst case was `for:` plus three intervals.
        "global": {"scrape_interval": interval, "evaluation_interval": half, "scrape_timeout": half},
        "rule_files": [RULES_PATH],
        "scrape_configs": jobs,
    }


def _half(duration: str) -> str:
    """Half of a bundle.yaml duration, as Prometheus spells it (milliseconds: 2s -> 1000ms)."""
    return f"{round(parse_duration(duration, what='monitoring duration') * 500)}ms"


def _job(name: str, target: str, role: str) -> dict:
    return {"job_name": name, "metrics_path": "/metrics",
            "static_configs": [{"targets": [target], "labels": {"role": role}}]}
