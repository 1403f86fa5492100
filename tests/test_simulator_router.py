"""The real sglang-router 0.3.2 (from .venv) in PD mode in front of two worker simulators on
127.0.0.1: proves the simulator speaks the protocol the router uses, and that a request through the
router passes through prefill (which sees the bootstrap room) and decode (which fetches it)."""

from __future__ import annotations

import re
import sys
import time
from contextlib import ExitStack, contextmanager

import pytest
import requests

from tests.sim_process import free_port, process, simulator, wait_http

CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]
# What a worker must answer for the router to register and route to it (found by running it).
ROUTER_CALLS = {"/health", "/server_info", "/model_info"}


def _metric(base: str, name: str) -> float:
    text = requests.get(base + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


@contextmanager
def pd_stack(tmp_path, *, router_bootstrap_port: int | None = None, decode_env=None, router_args=()):
    bootstrap = free_port()
    common = ("--disaggregation-transfer-backend", "nixl", "--disaggregation-bootstrap-port", str(bootstrap),
              "--enable-metrics", "--log-level", "debug")
    env = {"SIM_TTFT_MS": "100", "SIM_TPOT_MS": "5"}
    with ExitStack() as stack:
        prefill, _, prefill_log = stack.enter_context(simulator(
            tmp_path, "--disaggregation-mode", "prefill", *common, env=env, name="prefill",
            sglang_parser=True))
        decode, _, decode_log = stack.enter_context(simulator(
            tmp_path, "--disaggregation-mode", "decode", *common, env={**env, **(decode_env or {})},
            name="decode", sglang_parser=True))
        port = free_port()
        cmd = [sys.executable, "-m", "sglang_router.launch_router", "--pd-disaggregation",
               "--prefill", prefill, str(router_bootstrap_port or bootstrap), "--decode", decode,
               "--host", "127.0.0.1", "--port", str(port), "--health-check-interval-secs", "1",
               "--request-timeout-secs", "20",
               # Its Prometheus exporter defaults to 29000: two routers on one host must differ.
               "--prometheus-port", str(free_port()), *router_args]
        router_proc = stack.enter_context(process(cmd, tmp_path / "router.log"))
        router = f"http://127.0.0.1:{port}"
        wait_http(router + "/readiness", timeout=60, proc=router_proc)
        yield {"router": router, "prefill": prefill, "decode": decode,
               "prefill_log": prefill_log, "decode_log": decode_log}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with pd_stack(tmp_path_factory.mktemp("pd")) as s:
        yield s


def test_router_pairs_the_simulators(stack):
    body = requests.get(stack["router"] + "/readiness", timeout=5).json()
    assert body["status"] == "ready" and body["healthy_workers"] == 2


def test_a_chat_through_the_router_passes_prefill_and_decode(stack):
    before = {role: _metric(stack[role], "sglang:num_requests_total") for role in ("prefill", "decode")}
    r = requests.post(stack["router"] + "/v1/chat/completions", timeout=30,
                      json={"model": "dsv4", "messages": CAPITAL, "temperature": 0})
    assert r.status_code == 200, r.text
    assert "Paris" in r.json()["choices"][0]["message"]["content"]
    for role in ("prefill", "decode"):
        assert _metric(stack[role], "sglang:num_requests_total") == before[role] + 1
    rooms = re.findall(r"bootstrap_room: (\d+)", stack["prefill_log"].read_text())
    assert rooms and rooms[-1] in stack["decode_log"].read_text()


def test_generate_streams_through_the_router(stack):
    body = {"text": "hello", "sampling_params": {"max_new_tokens": 30, "ignore_eos": True,
                                                "temperature": 0}, "stream": True}
    start = time.monotonic()
    with requests.post(stack["router"] + "/generate", json=body, stream=True, timeout=30) as r:
        assert r.status_code == 200
        chunks = [line for line in r.iter_lines() if line.startswith(b"data: {")]
    assert len(chunks) == 30 and b'"completion_tokens":30' in chunks[-1]
    assert time.monotonic() - start >= 0.1  # prefill's TTFT was waited for


def test_the_router_calls_only_what_the_simulator_serves(stack):
    calls = set()
    for log in (stack["prefill_log"], stack["decode_log"]):
        for method, path, status in re.findall(r"\] (GET|POST|PUT|PRI) (\S+) -> (\d+)", log.read_text()):
            if method != "PRI":  # the router's gRPC probe (HTTP/2 preface) is refused, as by SGLang
                calls.add(path)
                assert status != "404", f"the router called {method} {path}, which is not served"
    assert ROUTER_CALLS <= calls


def test_a_router_with_the_wrong_bootstrap_port_fails_the_request(tmp_path):
    with pd_stack(tmp_path, router_bootstrap_port=free_port(),
                  decode_env={"SIM_KV_WAIT_SECS": "5"}) as s:
        start = time.monotonic()
        r = requests.post(s["router"] + "/v1/chat/completions", timeout=60,
                          json={"model": "dsv4", "messages": CAPITAL, "temperature": 0})
        assert r.status_code >= 500
        assert time.monotonic() - start < 30
        assert "KV transfer" in s["decode_log"].read_text()
