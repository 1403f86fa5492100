"""Smoke logic against the worker simulator run as a local process on 127.0.0.1 (no Docker)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from bundle import topology as registry
from bundle.config.model import SmokeCheck
from bundle.stack.frontdoor import FrontDoor
from bundle.verify.smoke import smoke
from bundle.stack.workers import HttpWorkers, parse_prometheus

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "bundle" / "simulator" / "simulated_model"
SERVED = "deepseek-v4-flash"
KEY = "sk-smoke-test-key-never-printed"
CHECKS = [SmokeCheck("What is the capital of France? Answer in one word.", "Paris"),
          SmokeCheck("And the capital of Japan?", "Tokyo")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_simulator(tmp_path_factory, *extra: str) -> tuple[str, subprocess.Popen]:
    port = _free_port()
    log = tmp_path_factory.mktemp("sim") / "simulator.log"
    env = dict(os.environ, SIM_LOAD_SECONDS="0", SIM_TTFT_MS="5", SIM_TPOT_MS="1",
               # The fallback parser starts in a second; SGLang's own parser is the rehearsal's.
               SIM_ARG_PARSER="fallback")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bundle.simulator", "--", "python3", "-m", "sglang.launch_server",
         "--model-path", str(MODEL), "--served-model-name", SERVED, "--host", "127.0.0.1",
         "--port", str(port), "--enable-metrics", *extra],
        cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"simulator exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if requests.get(url + "/health", timeout=2).status_code == 200:
                return url, proc
        except requests.RequestException:
            pass
        time.sleep(0.2)
    proc.kill()
    pytest.fail("simulator did not become healthy in 60 s")


@pytest.fixture(scope="module")
def simulator(tmp_path_factory):
    url, proc = _start_simulator(tmp_path_factory)
    yield url
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def keyed_simulator(tmp_path_factory):
    url, proc = _start_simulator(tmp_path_factory, "--api-key", KEY)
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def _faults(url: str, **knobs) -> None:
    requests.post(url + "/sim/faults", json=knobs, timeout=5).raise_for_status()


def run(url: str, *, key: str | None = None, topology: str = "tp4", workers=None, checks=CHECKS):
    front = FrontDoor(url, SERVED, key, readiness_path=registry.get(topology).readiness_path)
    return smoke(front, topology=topology, checks=checks, max_tokens=32,
                 request_timeout=10, workers=workers)


def test_a_right_server_passes_every_step(simulator):
    report = run(simulator)
    assert report.ok, json.dumps(report.to_dict(), indent=1)
    names = [s.name for s in report.steps]
    assert names == ["health", "model listed", "answer[1]", "streaming[1]", "greedy repeatable[1]",
                     "answer[2]", "streaming[2]", "greedy repeatable[2]"]
    assert "Paris" in report.answers[0]["answer"] and "Tokyo" in report.answers[1]["answer"]


def test_a_wrong_answer_fails_with_the_reason(simulator):
    _faults(simulator, wrong_answers=True)
    try:
        report = run(simulator)
    finally:
        _faults(simulator, wrong_answers=False)
    assert not report.ok
    failed = {s.name: s.detail for s in report.failures}
    assert set(failed) == {"answer[1]", "answer[2]"}  # streaming and greedy still agree
    assert "'Paris'" in failed["answer[1]"] and "Lyon" in failed["answer[1]"]


def test_expected_answers_are_data(simulator):
    report = run(simulator, checks=[SmokeCheck("What is the capital of Italy?", "Rome")])
    assert report.ok
    report = run(simulator, checks=[SmokeCheck("What is the capital of Italy?", "Milan")])
    assert [s.name for s in report.failures] == ["answer"]


def test_failing_server_is_reported_not_raised(simulator):
    _faults(simulator, failure_rate=1.0)
    try:
        report = run(simulator, checks=CHECKS[:1])
    finally:
        _faults(simulator, failure_rate=0.0)
    failed = {s.name: s.detail for s in report.failures}
    assert "HTTP 500" in failed["answer"] and "simulated failure" in failed["answer"]
    assert "health" not in failed  # /health is not a generation the fault applies to


def test_api_key_is_used_and_never_reported(keyed_simulator):
    assert run(keyed_simulator, key=KEY).ok
    report = run(keyed_simulator, key=None, checks=CHECKS[:1])
    failed = {s.name: s.detail for s in report.failures}
    assert "HTTP 401" in failed["answer"]
    for rep in (report, run(keyed_simulator, key=KEY)):
        assert KEY not in json.dumps(rep.to_dict())


def test_pd_proof_counts_requests_on_both_workers(simulator, keyed_simulator):
    # The simulator has no /readiness (a router's): health fails, the counter proof is what is tested.
    workers = HttpWorkers({"prefill": simulator, "decode": simulator})
    report = run(simulator, topology="pd", workers=workers, checks=CHECKS[:1])
    step = next(s for s in report.steps if s.name == "through prefill and decode")
    assert step.ok, step.detail
    assert "prefill counted 3 requests" in step.detail and "decode counted 3 requests" in step.detail
    # A worker the requests did not pass through (idle: its counters do not move) is caught.
    idle = HttpWorkers({"prefill": simulator, "decode": keyed_simulator})
    report = run(simulator, topology="pd", workers=idle, checks=CHECKS[:1])
    step = next(s for s in report.steps if s.name == "through prefill and decode")
    assert not step.ok and "decode counted 0 requests" in step.detail


def test_prometheus_sums_label_sets():
    text = ('# TYPE sglang:num_requests_total counter\n'
            'sglang:num_requests_total{model_name="m",is_streaming="false"} 4.0\n'
            'sglang:num_requests_total{model_name="a b",is_streaming="true"} 2.0 1700000000000\n'
            'process_open_fds 12\n')
    assert parse_prometheus(text) == {"sglang:num_requests_total": 6.0, "process_open_fds": 12.0}
