"""Every metric the dashboard queries and every alert with its runbook, from the monitoring code
(bundle.monitoring.dashboards.ROWS and bundle.monitoring.rules.alerts at the default thresholds);
metric names are read from each query by a PromQL parser, not by pattern."""

from __future__ import annotations

import re

import promql_parser

from docsgen.markdown import code, page, prose, table


def metric_names(expr: str) -> list[str]:
    """Every metric a PromQL expression selects (Grafana's $__rate_interval read as 5m)."""
    names: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                names.add(node.name)
            return
        for attr in ("lhs", "rhs", "expr", "vector_selector", "param"):
            child = getattr(node, attr, None)
            if child is not None and not isinstance(child, (str, int, float)):
                walk(child)
        for child in getattr(node, "args", None) or ():
            walk(child)

    walk(promql_parser.parse(expr.replace("$__rate_interval", "5m")))
    return sorted(names)


def _source(name: str) -> str:
    if name.startswith("sglang:"):
        return "SGLang"
    if name.startswith("smg_"):
        return "smg (the router)"
    if name.startswith("DCGM_"):
        return "DCGM exporter (GPU hosts)"
    return "Prometheus"


def reference(rows=None, alerts=None) -> str:
    from bundle.monitoring import dashboards, rules

    rows = rows if rows is not None else dashboards.ROWS
    if alerts is None:
        from bundle.config.loader import load_config

        alerts = rules.alerts(rules.Thresholds.of(load_config(None).monitoring))
    used: dict[str, list[str]] = {}
    for row_title, panels in rows:
        for panel in panels:
            for expr, _legend in panel.queries:
                for name in metric_names(expr):
                    used.setdefault(name, []).append(f"{row_title}: {panel.title}")
    for alert in alerts:
        for name in metric_names(alert.expr):
            used.setdefault(name, []).append(f"alert {alert.name}")
    metric_rows = [[code(name), prose(_source(name)), prose("; ".join(dict.fromkeys(where)))]
                   for name, where in sorted(used.items())]
    alert_rows = [[f"[{code(a.name)}](../monitoring.md#{a.runbook})", prose(a.severity), code(a.for_),
                   code(a.expr), prose(re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", r"<\1>", a.summary))] for a in alerts]
    return page("Metrics and alerts", "`bundle/monitoring/dashboards.py` and `bundle/monitoring/rules.py`",
                "The Grafana dashboard and the Prometheus rules of the monitoring profile "
                "([Monitoring](../monitoring.md)) name only metrics the pinned SGLang and smg emit "
                "(`tests/test_monitoring_contract.py`). Thresholds shown are the defaults "
                "(`monitoring` in the [configuration](configuration.md)).", "",
                "## Metrics the dashboard and the alerts use", "",
                table(["metric", "emitted by", "used in"], metric_rows), "",
                "## Alerts and their runbooks", "",
                table(["alert", "severity", "for", "expression", "summary"], alert_rows))
