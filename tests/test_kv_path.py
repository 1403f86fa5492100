"""A broken KV path named from what the servers report (bundle/verify/kv_path.py): the real router
(smg, from .venv) in front of worker simulators whose decode fails every KV transfer the way SGLang's
own fault injection does (SGLANG_TEST_DISAGG_FAILURE_PROB=1.0), driven through launch's real
readiness loop; and the watch's rules on their own (a fake clock, scripted /metrics)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from bundle import topology as registry
from bundle.stack import ready
from bundle.stack.frontdoor import FrontDoor
from bundle.stack.workers import HttpWorkers, Reply
from bundle.config.model import SmokeCheck
from bundle.verify import kv_path, smoke

PD = registry.get("pd")
TP4 = registry.get("tp4")


class _HealthyStack:
    """Every pd container running and healthy, as `docker compose ps` showed in the issue."""

    def states(self):
        return [SimpleNamespace(name=f"p-{s.name}-1", service=s.name, state="running", health="healthy",
                                restart_count=0, exit_code=0) for s in PD.services]

    def container_log_lines(self, container, since=None):
        return []

    def exits(self, since):
        return []


@pytest.mark.slow
def test_every_kv_transfer_failing_ends_the_wait_in_seconds_naming_the_transfer(tmp_path, monkeypatch):
    from tests.test_simulator_router import pd_stack

    monkeypatch.setattr(ready, "POLL_SECONDS", 0.5)
    with pd_stack(tmp_path, decode_env={"SGLANG_TEST_DISAGG_FAILURE_PROB": "1.0"}) as s:
        workers = HttpWorkers({"prefill": s["prefill"], "decode": s["decode"]})
        watch = kv_path.ServerErrorWatch(PD, workers, router_log=(tmp_path / "router.log").read_text)
        front = FrontDoor(url=s["router"], model="dsv4", readiness_path="/readiness")
        began = time.monotonic()
        with pytest.raises(ready.NotReady) as raised:
            ready.wait_ready(_HealthyStack(), PD, front, timeout=300, prompt="What is the capital of France?",
                             expected_services={x.name for x in PD.services}, report=lambda line: None,
                             server_errors=watch)
        took = time.monotonic() - began
        # Smoke's pd step says the same, from decode's counters moving during the smoke test.
        smoked = smoke.smoke(front, topology="pd", checks=[SmokeCheck("What is the capital of France?", "Paris")],
                             max_tokens=16, request_timeout=30, workers=workers)
    pd_step = next(step for step in smoked.steps if step.name == "through prefill and decode")
    assert not pd_step.ok and "the KV transfer between prefill and decode fails" in pd_step.detail
    assert "bundle doctor --only nixl" in pd_step.detail
    message, hint = raised.value.message, raised.value.hint
    assert took < 30, f"stopped after {took:.0f} s"
    assert message.startswith("the KV transfer between prefill and decode fails")
    # Decode's own counters, prefill's sent transfers (the KV left prefill), the router's line.
    assert f"{kv_path.TRANSFER_FAILED}" in message and "0 sglang:num_bootstrap_failed_reqs_total" in message
    transfer_failed = float(message.split(f" {kv_path.TRANSFER_FAILED}")[0].rsplit(" ", 1)[1])
    assert transfer_failed >= kv_path.CONFIRM_AFTER_ERRORS
    assert "fails on decode's side" in message
    assert "router: Decode server returned error status" in message and "front door: HTTP 5" in message
    assert "bundle doctor --only nixl" in hint and "UCX_TLS" in hint and "bootstrap port" in hint
    assert "launch_timeout" not in hint


class _Metrics:
    """Workers whose /metrics is scripted text; counts the reads."""

    def __init__(self, **texts):
        self.texts = texts
        self.reads = 0
        self.roles = list(texts)

    def get(self, role, path, *, timeout=30):
        self.reads += 1
        return Reply(200, self.texts[role])


def _clock(times):
    it = iter(times)
    return lambda: next(it)


def test_server_errors_with_decode_counting_no_failure_wait_out_the_limit_then_stop():
    healthy = _Metrics(prefill="sglang:kv_transfer_latency_ms_count 3\n", decode="sglang:num_requests_total 3\n")
    watch = kv_path.ServerErrorWatch(PD, healthy, clock=_clock([0, 2, 30, 61]))
    assert watch.server_error(500, "x") is None  # one error: counters not read yet
    assert watch.server_error(500, "x") is None and healthy.reads == 2
    assert watch.server_error(503, "x") is None
    message, hint = watch.server_error(500, "internal error")
    assert "failed with server errors for 61 s (4 tries; last HTTP 500: internal error)" in message
    assert "doctor --only nixl" in hint  # disaggregated: the transfer path is still the likeliest


def test_a_success_starts_the_count_again():
    watch = kv_path.ServerErrorWatch(TP4, None, clock=_clock([0, 59, 70, 129, 131]))
    assert watch.server_error(500, "x") is None and watch.server_error(500, "x") is None
    watch.succeeded()
    assert watch.server_error(500, "x") is None and watch.server_error(500, "x") is None
    message, hint = watch.server_error(500, "x")
    assert "for 61 s" in message and "nixl" not in hint  # one server: no KV path to blame


def test_a_bootstrap_failure_alone_names_the_kv_path():
    broken = _Metrics(prefill="", decode="sglang:num_bootstrap_failed_reqs_total 2\n")
    watch = kv_path.ServerErrorWatch(PD, broken, clock=_clock([0, 1]))
    watch.server_error(500, "x")
    message, _ = watch.server_error(500, "x")
    assert "2 sglang:num_bootstrap_failed_reqs_total" in message and "0 sglang:num_transfer_failed" in message
    assert "nothing left prefill" in message


def test_when_the_router_gives_up_first_the_headline_still_names_the_kv_path():
    broken = _Metrics(prefill="sglang:kv_transfer_latency_ms_count 1\n",
                      decode="sglang:num_transfer_failed_reqs_total 1\n")
    watch = kv_path.ServerErrorWatch(PD, broken, clock=_clock([0]))
    assert watch.explain() is None  # no generation failed yet: nothing to explain
    assert watch.server_error(500, "x") is None
    message, hint = watch.explain()
    assert message.startswith("the KV transfer between prefill and decode fails (decode counts 1 ")
    assert "doctor --only nixl" in hint


def test_status_names_the_kv_path_in_launchs_words_when_decode_counts_failures():
    from bundle.service import status
    from bundle.service.running import Launched

    class _Logs:
        def logs(self, service, tail=None):
            return "router | ERROR Decode server returned error status: 500 Internal Server Error\n"

    target = Launched("p-pd", PD, None, ("p-pd-router-1",), _Logs())
    broken = _Metrics(prefill="sglang:kv_transfer_latency_ms_count 4\n",
                      decode="sglang:num_transfer_failed_reqs_total 4\nsglang:num_aborted_requests_total 4\n")
    door = status.FrontDoorState("http://127.0.0.1:30000", status=500)
    status.kv_path_evidence(target, broken, door)
    assert door.kv_path.startswith("decode counts 4 sglang:num_transfer_failed_reqs_total, "
                                   "0 sglang:num_bootstrap_failed_reqs_total, 4 sglang:num_aborted_requests_total")
    assert "router: Decode server returned error status: 500" in door.kv_path
    assert door.kv_path_fix == kv_path.HINT
    healthy = _Metrics(prefill="sglang:kv_transfer_latency_ms_count 4\n", decode="sglang:num_requests_total 4\n")
    door = status.FrontDoorState("http://127.0.0.1:30000", status=500)
    status.kv_path_evidence(target, healthy, door)
    assert door.kv_path is None and "kv_path" not in door.to_dict()
