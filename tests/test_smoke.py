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
from bundle.errors import BundleError
from bundle.verify.smoke import REPLICA_PROBE, REPLICA_PROBE_TOKENS, smoke
from bundle.stack.workers import ComposeWorkers, HttpWorkers, parse_prometheus

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "bundle" / "rehearsal" / "simulator" / "simulated_model"
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
        [sys.executable, "-m", "bundle.rehearsal.simulator", "--", "python3", "-m", "sglang.launch_server",
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
                     "answer[2]", "streaming[2]", "greedy repeatable[2]", "long prompt (> 64 tokens)",
                     "not degenerate"]
    assert "Paris" in report.answers[0]["answer"] and "Tokyo" in report.answers[1]["answer"]


def test_a_wrong_answer_fails_with_the_reason(simulator):
    _faults(simulator, wrong_answers=True)
    try:
        report = run(simulator)
    finally:
        _faults(simulator, wrong_answers=False)
    assert not report.ok
    failed = {s.name: s.detail for s in report.failures}
    # streaming and greedy still agree; the long prompt asks the first question again
    assert set(failed) == {"answer[1]", "answer[2]", "long prompt (> 64 tokens)"}
    assert "'Paris'" in failed["answer[1]"] and "Lyon" in failed["answer[1]"]


def test_expected_answers_are_data(simulator):
    report = run(simulator, checks=[SmokeCheck("What is the capital of Italy?", "Rome")])
    assert report.ok
    report = run(simulator, checks=[SmokeCheck("What is the capital of Italy?", "Milan")])
    assert [s.name for s in report.failures] == ["answer", "long prompt (> 64 tokens)"]


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
    assert "prefill counted 4 requests" in step.detail and "decode counted 4 requests" in step.detail
    # A worker the requests did not pass through (idle: its counters do not move) is caught.
    idle = HttpWorkers({"prefill": simulator, "decode": keyed_simulator})
    report = run(simulator, topology="pd", workers=idle, checks=CHECKS[:1])
    step = next(s for s in report.steps if s.name == "through prefill and decode")
    assert not step.ok and "decode counted 0 requests" in step.detail


class _ThisHost:
    """A stack whose `exec` runs the command here instead of inside a container: the same argv
    ComposeWorkers hands `docker compose exec`, run by this host's sh and curl."""

    def exec(self, service: str, command: list[str]) -> str:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
        if done.returncode:
            raise BundleError(f"exit {done.returncode}: {done.stderr}")
        return done.stdout


def test_a_worker_is_asked_for_tokens_from_inside_its_container(simulator, keyed_simulator):
    """dp's probe of each replica: the POST script ComposeWorkers runs in the container (sh + curl,
    the body and URL as arguments, the status after the mark). Without the api_key secret (none on
    this host) it sends no key: the keyed server refuses it, the open one generates the tokens."""
    port = int(simulator.rsplit(":", 1)[1])
    reply = ComposeWorkers(_ThisHost(), {"replica-0": "replica-0"}, port=port).post("replica-0", "/generate",
                                                                                   REPLICA_PROBE)
    assert reply.status == 200, reply.text
    assert json.loads(reply.text)["meta_info"]["completion_tokens"] == REPLICA_PROBE_TOKENS
    keyed = ComposeWorkers(_ThisHost(), {"replica-0": "replica-0"}, port=int(keyed_simulator.rsplit(":", 1)[1]))
    assert keyed.post("replica-0", "/generate", REPLICA_PROBE).status == 401
    assert keyed.address("replica-0") == f"http://replica-0:{keyed.port}"  # as DP_WORKER_URLS names it
    gone = ComposeWorkers(_ThisHost(), {"replica-0": "replica-0"}, port=_free_port())  # nothing listens
    assert gone.post("replica-0", "/generate", REPLICA_PROBE).status == 0  # no answer: down


def test_prometheus_sums_label_sets():
    text = ('# TYPE sglang:num_requests_total counter\n'
            'sglang:num_requests_total{model_name="m",is_streaming="false"} 4.0\n'
            'sglang:num_requests_total{model_name="a b",is_streaming="true"} 2.0 1700000000000\n'
            'process_open_fds 12\n')
    assert parse_prometheus(text) == {"sglang:num_requests_total": 6.0, "process_open_fds": 12.0}


# ---- guards for failures reported on sm_120 -----------------------------------------------------

def test_a_server_answering_the_same_token_every_step_fails_as_degenerate(simulator):
    """vLLM #52938: "Paris Paris Paris ..." contains the expected word, streams the same and is
    greedy-repeatable; only the degenerate-output check catches it."""
    _faults(simulator, repeat_token=True)
    try:
        report = run(simulator, checks=CHECKS[:1])
    finally:
        _faults(simulator, repeat_token=False)
    failed = {s.name: s.detail for s in report.failures}
    assert list(failed) == ["not degenerate"], failed
    assert "one word 32 times in a row" in failed["not degenerate"]


def test_a_failing_long_prompt_path_fails_the_long_prompt_step_only(simulator):
    """flashinfer #5135: short prompts serve, prompts over 64 tokens take the path that fails."""
    _faults(simulator, long_prompt_fail=True)
    try:
        report = run(simulator, checks=CHECKS[:1])
    finally:
        _faults(simulator, long_prompt_fail=False)
    failed = {s.name: s.detail for s in report.failures}
    assert list(failed) == ["long prompt (> 64 tokens)"], failed
    assert "HTTP 500" in failed["long prompt (> 64 tokens)"]
    passed = next(s for s in run(simulator, checks=CHECKS[:1]).steps if s.name.startswith("long prompt"))
    assert passed.ok and int(passed.detail.split()[0]) > 64


@pytest.mark.parametrize("text, why", [
    ("Paris " * 8, "one word 8 times in a row"),
    ("a b a b a b a b a b a b", "only 2 distinct of 12 words"),
    ("!" * 30, "one character 30 times in a row"),
    ("The capital of France is Paris.", None),
])
def test_degenerate_output_floors(text, why):
    from bundle.verify.smoke import degenerate

    assert degenerate(text) == why


def test_answers_are_compared_with_the_last_report_of_another_topology(simulator, tmp_path):
    from bundle.verify.smoke import compare_answers, last_comparable_report

    report = run(simulator, checks=CHECKS[:1])
    identity = {"lock_hash": "abc", "image": "img", "model": SERVED, "max_tokens": 32, "rehearsal": True}
    pd_dir = tmp_path / "sglang-bundle-pd"
    for stamp, answer in (("20261201-080000", "The capital of France is Paris."),
                          ("20261201-090000", "The capital of France is Lyon.")):
        (pd_dir / f"{stamp}-smoke").mkdir(parents=True)
        stored = {"topology": "pd", "answers": [{"prompt": CHECKS[0].prompt, "answer": answer}], **identity}
        (pd_dir / f"{stamp}-smoke" / "smoke.json").write_text(json.dumps(stored))
    (pd_dir / "20261201-100000-smoke").mkdir()  # newer, but another image: not comparable
    (pd_dir / "20261201-100000-smoke" / "smoke.json").write_text(json.dumps(
        {"topology": "pd", "answers": [{"prompt": CHECKS[0].prompt, "answer": "x"}], **identity, "image": "old"}))
    earlier, path = last_comparable_report([pd_dir], identity)
    assert path.endswith("20261201-090000-smoke/smoke.json")
    compare_answers(report, earlier)
    step = report.steps[-1]
    assert step.name == "same answers as pd" and not step.ok and "Lyon" in step.detail
    same = run(simulator, checks=CHECKS[:1])
    compare_answers(same, {"topology": "pd", "answers": [dict(a) for a in report.answers]})
    assert same.steps[-1].ok and "identical to pd" in same.steps[-1].detail
    untouched = run(simulator, checks=CHECKS[:1])
    compare_answers(untouched, None)
    assert not any(s.name.startswith("same answers") for s in untouched.steps)


class _ScriptedMetrics:
    """Workers whose /metrics are given per reading (before, after): decode's KV record as SGLang 0.5.23
    keeps it, the decode_transferred stage."""

    roles = ("prefill", "decode")

    def __init__(self, received_after: float):
        self.readings = {"prefill": 0, "decode": 0}
        self.received_after = received_after

    def get(self, role, path, timeout=10):
        from types import SimpleNamespace

        n = self.readings[role]
        self.readings[role] += 1
        requests_seen = 4.0 * n
        text = (f'sglang:num_requests_total{{is_streaming="false"}} {requests_seen}\n'
                f'sglang:generation_tokens_total{{is_streaming="false"}} {8.0 * n}\n')
        if role == "decode":
            received = self.received_after if n else 0.0
            text += ('sglang:per_stage_req_latency_seconds_count{stage="decode_prepare"} 99\n'
                     f'sglang:per_stage_req_latency_seconds_count{{stage="decode_transferred"}} {received}\n')
        return SimpleNamespace(status=200, text=text)

    def log(self, role):
        return ""


@pytest.mark.parametrize("received, ok", [(4.0, True), (2.0, False)])
def test_decode_must_have_received_a_kv_cache_for_every_request_it_served(simulator, received, ok):
    report = run(simulator, topology="pd", workers=_ScriptedMetrics(received), checks=CHECKS[:1])
    step = next(s for s in report.steps if s.name == "through prefill and decode")
    assert step.ok is ok, step.detail
    # Only the decode_transferred stage counts, not decode's other stages.
    assert f"received the KV cache of {received:g} requests" in step.detail


def test_the_post_script_sends_the_secrets_key_as_one_header_and_none_without_it(tmp_path):
    """The POST script under Debian's /bin/sh (dash, as in the images), with a curl that prints its
    arguments: the secret's key (spaces and all) travels as one Authorization header; with no key
    file, no header. The script is the shipped one; only the secret's path points here."""
    from bundle.stack.workers import _POST_SCRIPT, _STATUS_MARK

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "curl").write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    (fake / "curl").chmod(0o755)
    key = tmp_path / "api_key"
    script = _POST_SCRIPT.replace("/run/secrets/api_key", str(key))
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")

    def argv() -> list[str]:
        done = subprocess.run(["sh", "-c", script, "post", "30", '{"text": "a b"}', _STATUS_MARK, "http://w/generate"],
                              capture_output=True, text=True, env=env, check=True)
        return done.stdout.split("\n")

    key.write_text("sk-with space\n")
    args = argv()
    assert args[args.index("Content-Type: application/json") + 1:][:2] == ["-H", "Authorization: Bearer sk-with space"]
    assert '{"text": "a b"}' in args and "http://w/generate" in args
    key.unlink()
    assert not any(a.startswith("Authorization") for a in argv())
