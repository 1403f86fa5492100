"""A reconcile's readiness decision: which workers it brings back, and when an unhealthy router is
expected (a worker it needs is coming back) rather than a failure."""

from __future__ import annotations

from types import SimpleNamespace

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
