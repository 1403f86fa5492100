"""The rendered monitoring files pass Prometheus' own checker (`promtool check config|rules`, Debian's
prometheus 2.42, installed by docker/host-packages.sh), and `promtool test rules` proves every
alert fires on a series that should fire it and stays quiet on one that should not, with the
thresholds bundle.yaml's defaults render."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from bundle.config.loader import load_config
from bundle.monitoring.files import monitoring_files
from bundle.monitoring.rules import Thresholds, alerts
from bundle.topology import get
from tests.conftest import require_tool



@pytest.fixture(scope="module", autouse=True)
def promtool() -> str:
    return require_tool("promtool", "docker/host-packages.sh installs Debian's prometheus")


INTERVAL = "15s"
SERVER = {"job": "decode", "role": "server", "instance": "decode:30000"}
SERVER_OK = {"job": "prefill", "role": "server", "instance": "prefill:30000"}
ROUTER = {"job": "router", "role": "router", "instance": "router:29000"}


def _series(name: str, labels: dict, values: str) -> dict:
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{text}}}", "values": values}


def _buckets(name: str, labels: dict, per_scrape: dict[str, int]) -> list[dict]:
    """A histogram whose every scrape adds per_scrape[le] observations at or below le."""
    return [_series(f"{name}_bucket", {**labels, "le": le}, f"0+{n}x100" if n else "0x100")
            for le, n in per_scrape.items()]


# alert -> (input series, eval time, labels of the ONE series expected to fire). Each case also
# holds a series that must stay quiet (SERVER_OK, a healthy worker, a fast histogram ...).
CASES = {
    "TargetDown": ([_series("up", SERVER, "1 1 0x20"), _series("up", SERVER_OK, "1x22")], "4m", SERVER),
    "RouterWorkerUnhealthy": ([
        _series("smg_worker_health", {**ROUTER, "worker": "http://decode:30000"}, "1 1 0x20"),
        _series("smg_worker_health", {**ROUTER, "worker": "http://prefill:30000"}, "1x22")],
        "4m", {**ROUTER, "worker": "http://decode:30000"}),
    "NoHealthyWorker": ([
        _series("smg_worker_health", {**ROUTER, "worker": "http://decode:30000"}, "1 0x20"),
        _series("smg_worker_health", {**ROUTER, "worker": "http://prefill:30000"}, "1 0x20"),
        _series("smg_worker_health", {"job": "router-b", "worker": "http://decode-b:30000"}, "0x21"),
        _series("smg_worker_health", {"job": "router-b", "worker": "http://prefill-b:30000"}, "1x21")],
        "4m", {"job": "router"}),
    "KvTransferSlow": (
        # TCP-like: every transfer at about 1 GB/s; cuda_ipc-like: about 20 GB/s.
        _buckets("sglang:kv_transfer_speed_gb_s", {"job": "decode"}, {"0.5": 0, "1": 10, "10": 10, "25": 10,
                                                                      "+Inf": 10})
        + _buckets("sglang:kv_transfer_speed_gb_s", {"job": "decode-ipc"}, {"0.5": 0, "1": 0, "10": 0, "25": 10,
                                                                            "+Inf": 10}),
        "20m", {"job": "decode"}),
    # A failure a scrape (15 s) since the start on decode; prefill, which counts none, stays quiet.
    "KvTransferFailing": ([_series("sglang:num_transfer_failed_reqs_total", SERVER, "0+1x100"),
                           _series("sglang:num_transfer_failed_reqs_total", SERVER_OK, "0x100")],
                          "4m", {"job": "decode"}),
    "KvBootstrapFailing": ([_series("sglang:num_bootstrap_failed_reqs_total", SERVER, "0 0 0+1x100"),
                            _series("sglang:num_bootstrap_failed_reqs_total", SERVER_OK, "3x100")],
                           "4m", {"job": "decode"}),
    "RequestsAborted": ([_series("sglang:num_aborted_requests_total", SERVER, "0+2x100"),
                         _series("sglang:num_aborted_requests_total", SERVER_OK, "7x100")],
                        "20m", {"job": "decode"}),
    "CudaGraphsOff": ([
        _series("sglang:is_cuda_graph", {"job": "decode", "engine_type": "decode"}, "0x100"),
        _series("sglang:generation_tokens_total", {"job": "decode"}, "0+100x100"),
        _series("sglang:is_cuda_graph", {"job": "decode-graphs", "engine_type": "decode"}, "1x100"),
        _series("sglang:generation_tokens_total", {"job": "decode-graphs"}, "0+100x100"),
        # prefill batches never run in a graph: not an alert
        _series("sglang:is_cuda_graph", {"job": "prefill", "engine_type": "prefill"}, "0x100"),
        _series("sglang:generation_tokens_total", {"job": "prefill"}, "0+100x100")],
        "20m", {"job": "decode"}),
    "TtftAboveObjective": (
        _buckets("sglang:time_to_first_token_seconds", {"job": "decode"}, {"1": 0, "4": 0, "6": 10, "+Inf": 10})
        + _buckets("sglang:time_to_first_token_seconds", {"job": "prefill"}, {"1": 10, "4": 10, "6": 10,
                                                                             "+Inf": 10}),
        "20m", {"job": "decode"}),
    "TpotAboveObjective": (
        _buckets("sglang:request_time_per_output_token_seconds", {"job": "decode"},
                 {"0.04": 0, "0.1": 10, "+Inf": 10})
        + _buckets("sglang:request_time_per_output_token_seconds", {"job": "prefill"},
                   {"0.04": 10, "0.1": 10, "+Inf": 10}),
        "20m", {"job": "decode"}),
    "QueueGrowing": ([_series("sglang:num_queue_reqs", SERVER, "0+1x100"),
                      _series("sglang:num_queue_reqs", SERVER_OK, "5x100")], "20m", SERVER),
    "KvCacheNearlyFull": ([_series("sglang:token_usage", SERVER, "0.99x100"),
                           _series("sglang:token_usage", SERVER_OK, "0.5x100")], "20m", SERVER),
    # Two restarts (four changes of `up`) in the window against one.
    "RestartLoop": ([_series("up", SERVER, "1 0 1 0 1 1 1 1 1"), _series("up", SERVER_OK, "1 1 0 1 1 1 1 1 1")],
                    "2m", SERVER),
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    """The files a pd launch on a GPU host renders, with bundle.yaml's default thresholds."""
    folder = tmp_path_factory.mktemp("monitoring")
    files = monitoring_files(get("pd"), load_config(None).monitoring, worker_port=30000, fast=False,
                             gpu_host=True)
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_promtool_accepts_the_rendered_config_and_rules(rendered):
    config = _promtool("check", "config", "prometheus/prometheus.yml", cwd=rendered)
    assert config.returncode == 0, config.stdout + config.stderr
    assert "SUCCESS" in config.stdout
    rules = _promtool("check", "rules", "prometheus/rules/alerts.yml", cwd=rendered)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert f"SUCCESS: {len(CASES)} rules found" in rules.stdout


def test_every_alert_has_a_case_and_a_runbook_line():
    names = {a.name for a in alerts(Thresholds())}
    assert names == set(CASES)
    runbook = (Path(__file__).resolve().parents[1] / "docs" / "monitoring.md").read_text()
    headings = {m.lower() for m in re.findall(r"^#+ `?(\w+)`?", runbook, flags=re.M)}
    assert {n.lower() for n in names} <= headings


def _expected(alert, labels: dict) -> dict:
    summary = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], alert.summary)
    return {"exp_labels": {**labels, "severity": alert.severity},
            "exp_annotations": {"summary": summary, "runbook": alert.rule()["annotations"]["runbook"]}}


def test_each_alert_fires_on_its_failure_and_stays_quiet_otherwise(rendered):
    by_name = {a.name: a for a in alerts(Thresholds.of(load_config(None).monitoring))}
    tests = []
    for name, (series, at, firing) in CASES.items():
        tests.append({"interval": INTERVAL, "input_series": series, "alert_rule_test": [
            # Before the failure has lasted `for:`, nothing; after, exactly the failing series.
            {"eval_time": "0m", "alertname": name, "exp_alerts": []},
            {"eval_time": at, "alertname": name, "exp_alerts": [_expected(by_name[name], firing)]}]})
    (rendered / "prometheus" / "alerts_test.yml").write_text(yaml.safe_dump(
        {"rule_files": ["rules/alerts.yml"], "evaluation_interval": INTERVAL, "tests": tests}, sort_keys=False))
    result = _promtool("test", "rules", "alerts_test.yml", cwd=rendered / "prometheus")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_a_wrong_expectation_fails_promtool(rendered):
    """The unit tests can fail: a quiet series claimed to fire is reported."""
    series, at, _ = CASES["KvCacheNearlyFull"]
    alert = next(a for a in alerts(Thresholds.of(load_config(None).monitoring)) if a.name == "KvCacheNearlyFull")
    test = {"interval": INTERVAL, "input_series": series, "alert_rule_test": [
        {"eval_time": at, "alertname": alert.name, "exp_alerts": [_expected(alert, SERVER_OK)]}]}
    (rendered / "prometheus" / "wrong_test.yml").write_text(yaml.safe_dump(
        {"rule_files": ["rules/alerts.yml"], "evaluation_interval": INTERVAL, "tests": [test]}))
    result = _promtool("test", "rules", "wrong_test.yml", cwd=rendered / "prometheus")
    assert result.returncode != 0
