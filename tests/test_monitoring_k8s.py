"""`bundle render --target k8s` writes the monitoring objects: PodMonitors that select exactly the
servers' leader pods (the ones serving /metrics) and the router's metrics port, the compose
profile's alert rules as a PrometheusRule, the dashboard as a ConfigMap; all checked offline, and a
wrong field is refused naming the manifest and the field."""

from __future__ import annotations

import copy
import json

import pytest

from bundle.config.loader import load_config
from bundle.monitoring import dashboards
from bundle.monitoring.rules import Thresholds, alerts
from bundle.targets.k8s import manifests as k8s
from bundle.render.compose import program_args
from bundle.targets.k8s import validation as manifests
from bundle.topology import ROUTER_MODULE
from tests.conftest import render_for

pytestmark = pytest.mark.usefixtures("runs_dir")


def _matches(selector: dict, labels: dict) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    return all(labels.get(e["key"]) in e["values"] for e in selector.get("matchExpressions", []))


@pytest.fixture(scope="module", params=["DisaggregatedSet", "LeaderWorkerSets"])
def pd(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "bundle.yaml"
    path.write_text(f"kubernetes: {{pd: {{form: {request.param}}}}}\n")
    dep = load_config(path)
    return k8s.render(dep, render_for(dep, "pd"))


def _kind(rendered, kind):
    return [o for o in rendered.objects if o["kind"] == kind]


def _groups(rendered):
    """(leaderWorkerTemplate, labels the controller adds to its pods) of every LWS group: the
    LeaderWorkerSets, or the DisaggregatedSet's roles (GenerateLabels, LWS v0.10.0
    pkg/utils/disaggregatedset/utils.go, one revision in slice 0)."""
    for lws in _kind(rendered, "LeaderWorkerSet"):
        yield lws["spec"]["leaderWorkerTemplate"], {}
    for ds in _kind(rendered, "DisaggregatedSet"):
        name = ds["metadata"]["name"]
        for role in ds["spec"]["roles"]:
            yield role["spec"]["leaderWorkerTemplate"], {
                "app": f"{name}-0-{role['name']}", "disaggregatedset.x-k8s.io/name": name,
                "disaggregatedset.x-k8s.io/role": role["name"], "disaggregatedset.x-k8s.io/slice": "0",
                "disaggregatedset.x-k8s.io/revision": "5d8c7f9a"}


def test_the_server_pod_monitor_selects_the_leaders_only_and_the_router_monitor_its_metrics_port(pd):
    servers, router = sorted(_kind(pd, "PodMonitor"), key=lambda o: o["metadata"]["name"])[::-1]
    assert servers["metadata"]["name"].endswith("-servers")
    routers = [deployment["spec"]["template"] for deployment in _kind(pd, "Deployment")]
    for template, added in _groups(pd):
        if "leaderTemplate" not in template:  # the set's router role: one pod, made of workerTemplate
            routers.append({**template["workerTemplate"], "metadata": {"labels": {
                **template["workerTemplate"]["metadata"]["labels"], **added,
                "leaderworkerset.sigs.k8s.io/worker-index": "0"}}})
            continue
        leader = {**template["leaderTemplate"]["metadata"]["labels"], **added,
                  "leaderworkerset.sigs.k8s.io/worker-index": "0"}
        worker = {**template["workerTemplate"]["metadata"]["labels"], **added,
                  "leaderworkerset.sigs.k8s.io/worker-index": "1"}
        assert _matches(servers["spec"]["selector"], leader)
        assert not _matches(servers["spec"]["selector"], worker)  # other ranks serve no HTTP
        ports = {p["name"] for p in template["leaderTemplate"]["spec"]["containers"][0]["ports"]}
        assert servers["spec"]["podMetricsEndpoints"][0]["port"] in ports
    (pod,) = routers
    assert _matches(router["spec"]["selector"], pod["metadata"]["labels"])
    assert not _matches(servers["spec"]["selector"], pod["metadata"]["labels"])
    container = pod["spec"]["containers"][0]
    port = {p["name"]: p["containerPort"] for p in container["ports"]}[router["spec"]["podMetricsEndpoints"][0]["port"]]
    args = program_args(container["args"], ROUTER_MODULE) or container["args"]
    assert args[args.index("--prometheus-port") + 1] == str(port)
    assert "api" not in json.dumps(router["spec"]).lower()  # no key, no auth in a scrape


def test_the_rules_and_the_dashboard_are_the_compose_profiles_own(pd):
    (rule,) = _kind(pd, "PrometheusRule")
    names = [r["alert"] for r in rule["spec"]["groups"][0]["rules"]]
    assert names == [a.name for a in alerts(Thresholds.of(load_config(None).monitoring))]
    (board,) = [o for o in _kind(pd, "ConfigMap") if o["metadata"]["labels"].get("grafana_dashboard") == "1"]
    assert json.loads(board["data"]["sglang-bundle.json"]) == dashboards.dashboard()


def test_every_monitoring_manifest_passes_its_schema_and_a_wrong_field_is_named(pd):
    picked = [(n, o) for n, o in zip(pd.file_names(), pd.objects) if o["kind"] in ("PodMonitor", "PrometheusRule",
                                                                                  "ConfigMap")]
    assert len(picked) == 4
    assert manifests.problems([o for _, o in picked], [n for n, _ in picked]) == []
    name, monitor = next((n, o) for n, o in picked if o["kind"] == "PodMonitor")
    broken = copy.deepcopy(monitor)
    broken["spec"]["podMetricsEndpoints"][0]["intervall"] = "15s"
    (problem,) = manifests.problems([broken], [name])
    assert problem.startswith(f"{name}: spec.podMetricsEndpoints[0]") and "intervall" in problem
