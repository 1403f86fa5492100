"""The monitoring objects of a Kubernetes render, for the Prometheus Operator and Grafana's
dashboard sidecar: a PodMonitor for the servers' leaders (SGLang's /metrics on the http port), one
for the router (smg's exporter, port `metrics`), the alert rules as a PrometheusRule, and the
dashboard as a ConfigMap labelled `grafana_dashboard`. The rules and the dashboard are the compose
profile's own (bundle/monitoring), so one source feeds both."""

from __future__ import annotations

from bundle.monitoring.rules import Thresholds, prom_duration, rules_document
from bundle.targets.k8s import commands as cmd
from bundle.targets.k8s import disaggregated

MONITORING_API = "monitoring.coreos.com/v1"
ROUTER_METRICS_PORT_NAME = "metrics"


def objects(builder, server_roles: list[str], has_router: bool) -> list[dict]:
    """builder: the manifests' _Builder (names, labels, namespace, config)."""
    monitoring = builder.dep.monitoring
    interval = prom_duration(monitoring.scrape_interval)
    base, out = builder.base, []
    labels = builder.labels()
    # A DisaggregatedSet's pods of every revision and slice: its controller's name label on top.
    of_set = {disaggregated.SET_NAME_LABEL: base} if builder.one_set else {}
    out.append(_pod_monitor(builder, f"{base}-servers", labels, interval, port="http", match={
        "matchLabels": {"io.sglang-bundle.project": base, **of_set, cmd.LWS_WORKER_INDEX_LABEL: "0"},
        "matchExpressions": [{"key": "io.sglang-bundle.role", "operator": "In", "values": sorted(server_roles)}]}))
    if has_router:
        out.append(_pod_monitor(builder, f"{base}-router", labels, interval, port=ROUTER_METRICS_PORT_NAME,
                                match={"matchLabels": {"io.sglang-bundle.project": base, **of_set,
                                                       "io.sglang-bundle.role": "router"}}))
    rules = rules_document(Thresholds.of(monitoring))
    # In Kubernetes the scrape job is the pod monitor's, not the compose service: the role label
    # (relabelled from the pod's) keeps the rules' {role=~"server|router"} selections meaningful.
    out.append({"apiVersion": MONITORING_API, "kind": "PrometheusRule",
                "metadata": builder.meta(f"{base}-alerts", labels), "spec": rules})
    out.append({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": builder.meta(f"{base}-dashboard", {**labels, "grafana_dashboard": "1"}),
                "data": {"sglang-bundle.json": _dashboard_json()}})
    return out


def _pod_monitor(builder, name: str, labels: dict, interval: str, *, port: str, match: dict) -> dict:
    role = "router" if port == ROUTER_METRICS_PORT_NAME else "server"
    return {"apiVersion": MONITORING_API, "kind": "PodMonitor", "metadata": builder.meta(name, labels),
            "spec": {"selector": match, "namespaceSelector": {"matchNames": [builder.k8s.namespace]},
                     "podMetricsEndpoints": [{
                         "port": port, "path": "/metrics", "interval": interval, "scrapeTimeout": interval,
                         # job = the pod's service name (prefill, decode, router ...) as in compose.
                         "relabelings": [
                             {"sourceLabels": ["__meta_kubernetes_pod_label_io_sglang_bundle_service"],
                              "targetLabel": "job"},
                             {"targetLabel": "role", "replacement": role}]}]}}


def _dashboard_json() -> str:
    # Imported here: the dashboard library (grafana-foundation-sdk) is most of the Kubernetes wing's
    # import time, and only a render with monitoring needs it (not the registry that lists the wing).
    from bundle.monitoring import dashboards

    return dashboards.dashboard_json()
