"""A reconcile's readiness decision: which workers it brings back, and when an unhealthy router is
expected (a worker it needs is coming back) rather than a failure."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bundle import topology as registry
from bundle.stack.ready import ServiceView, router_awaits_workers, workers_away

PD = registry.get("pd")
EXPECTED = {s.name for s in PD.active_services()}
ROUTER = PD.router.name
PREFILL, DECODE = (s.name for s in PD.servers)


def view(service, state="running", health="healthy"):
    return ServiceView(service, state, health, restarts=0, exit_code=None, milestone=None)


def state(service, st):
    return SimpleNamespace(service=service, state=st)


def test_a_worker_an_operator_stopped_is_what_the_reconcile_brings_back():
    before = [state(PREFILL, "exited"), state(DECODE, "running"), state(ROUTER, "running")]
    assert workers_away(before, PD, EXPECTED) == {PREFILL}


def test_a_missing_worker_is_brought_back_and_the_router_is_never_a_worker():
    before = [state(DECODE, "running"), state(ROUTER, "exited")]
    assert workers_away(before, PD, EXPECTED) == {PREFILL}


def test_the_router_unhealthy_while_the_returning_worker_starts_is_expected():
    views = [view(PREFILL, health="starting"), view(DECODE), view(ROUTER, health="unhealthy")]
    assert router_awaits_workers(views[2], views, PD, {PREFILL})
    stopped = [view(PREFILL, state="exited", health=""), view(DECODE), view(ROUTER, health="unhealthy")]
    assert router_awaits_workers(stopped[2], stopped, PD, {PREFILL})


def test_once_the_returning_worker_is_healthy_nothing_more_is_excused():
    views = [view(PREFILL), view(DECODE), view(ROUTER, health="unhealthy")]
    assert not router_awaits_workers(views[2], views, PD, {PREFILL})


def test_a_worker_failing_during_the_wait_does_not_excuse_the_router():
    # decode was running when the launch began (not returning): its failure stays a failure.
    views = [view(PREFILL), view(DECODE, health="unhealthy"), view(ROUTER, health="unhealthy")]
    assert not router_awaits_workers(views[2], views, PD, set())
    assert not router_awaits_workers(views[2], views, PD, {PREFILL})


def test_only_the_router_is_excused_never_a_worker():
    views = [view(PREFILL, health="unhealthy"), view(DECODE), view(ROUTER, health="unhealthy")]
    assert not router_awaits_workers(views[0], views, PD, {PREFILL})
    tp4 = registry.get("tp4")
    single = [view(tp4.servers[0].name, health="unhealthy")]
    assert not router_awaits_workers(single[0], single, tp4, {tp4.servers[0].name})


class ReconcilingStack:
    """Stands in for docker.Stack's reads during a wait: a script of `docker compose ps` answers,
    one per poll (the last repeated), no logs."""

    def __init__(self, polls):
        self.polls = polls
        self.n = 0

    def states(self):
        answer = self.polls[min(self.n, len(self.polls) - 1)]
        self.n += 1
        return [SimpleNamespace(name=f"p-{s}-1", service=s, state=st, health=h, restart_count=0, exit_code=0)
                for s, st, h in answer]

    def container_log_lines(self, container, since=None):
        return []

    def exits(self, since):
        return []


def _wait(monkeypatch, polls, returning):
    from bundle.stack import ready

    monkeypatch.setattr(ready, "POLL_SECONDS", 0)
    monkeypatch.setattr(ready, "front_door_state", lambda front, **kw: (True, "/readiness: HTTP 200"))
    monkeypatch.setattr(ready, "first_generation", lambda front, prompt: "Paris")
    lines = []
    result = ready.wait_ready(ReconcilingStack(polls), PD, SimpleNamespace(url="http://x", redact=str), timeout=60,
                              prompt="?", expected_services=EXPECTED, report=lines.append, returning=returning)
    return result, lines


# Prefill stopped by an operator; the router kept running and turned unhealthy; decode untouched.
RECONCILE = [
    [(PREFILL, "exited", ""), (DECODE, "running", "healthy"), (ROUTER, "running", "unhealthy")],
    [(PREFILL, "running", "starting"), (DECODE, "running", "healthy"), (ROUTER, "running", "unhealthy")],
    [(PREFILL, "running", "healthy"), (DECODE, "running", "healthy"), (ROUTER, "running", "unhealthy")],
    [(PREFILL, "running", "healthy"), (DECODE, "running", "healthy"), (ROUTER, "running", "healthy")],
]


def test_a_reconcile_waits_through_the_routers_unhealthy_state_until_it_serves(monkeypatch):
    result, lines = _wait(monkeypatch, RECONCILE, returning={PREFILL})
    assert result.generation_text == "Paris"
    assert any("router: unhealthy while a worker it needs comes back" in line for line in lines)


def test_without_a_returning_worker_an_unhealthy_router_still_ends_the_wait(monkeypatch):
    from bundle.stack.ready import NotReady

    with pytest.raises(NotReady, match="router turned unhealthy"):
        _wait(monkeypatch, RECONCILE[2:], returning=set())
