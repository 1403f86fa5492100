"""Metrics and monitoring: Prometheus' scrape config, the alert rules, the Grafana dashboards
(generated from this package, never hand-edited) and the live figures `bundle top` shows."""
