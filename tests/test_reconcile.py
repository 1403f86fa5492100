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


# ---- a relaunch with changed options (bundle/stack/reconcile.py) through the driver's real Stack ----

from pathlib import Path  # noqa: E402

from bundle.stack import docker, reconcile  # noqa: E402
from bundle.stack import engine as docker_engine  # noqa: E402
from tests.fake_docker import C, FakeEngine  # noqa: E402

SERVERS = {PREFILL, DECODE}
OLD = {PREFILL: "p-old", DECODE: "d-old", ROUTER: "r-old"}


def _stack(monkeypatch, containers):
    engine = FakeEngine("rel", [containers])
    monkeypatch.setattr(docker_engine, "client", engine.client)
    return engine, docker.Stack("rel", [Path("unused.yaml")], Path("unused.env"))


def _plan(monkeypatch, containers, wanted, **kw):
    _engine, stack = _stack(monkeypatch, containers)
    return reconcile.plan(stack.states(), wanted, EXPECTED, servers=SERVERS, **kw)


def test_a_changed_worker_option_recreates_exactly_the_workers_servers_first_the_router_kept(monkeypatch):
    # After `docker kill` of prefill, relaunched without the --sim knob: both workers' hashes moved.
    # The stopped prefill is recreated before the running decode is taken down: decode first left only
    # the router running for a moment (fewer than the two that ran before; CI saw it, 2026-12-03).
    containers = [C(PREFILL, state="exited", health=None, exit_code=137, config_hash=OLD[PREFILL]),
                  C(DECODE, config_hash=OLD[DECODE]), C(ROUTER, config_hash=OLD[ROUTER])]
    steps = _plan(monkeypatch, containers, {PREFILL: "p-new", DECODE: "d-new", ROUTER: OLD[ROUTER]})
    assert [(s.service, s.action) for s in steps] == [
        (PREFILL, "recreate"), (DECODE, "recreate"), (ROUTER, "keep")]
    assert "config hash d-old -> d-new" in steps[1].reason
    assert steps[2].reason == "running, configuration unchanged"


def test_no_recreate_only_starts_what_is_stopped_and_says_what_it_kept(monkeypatch):
    containers = [C(PREFILL, state="exited", health=None, config_hash=OLD[PREFILL]),
                  C(DECODE, config_hash=OLD[DECODE]), C(ROUTER, config_hash=OLD[ROUTER])]
    steps = _plan(monkeypatch, containers, {PREFILL: "p-new", DECODE: "d-new", ROUTER: OLD[ROUTER]},
                  no_recreate=True)
    assert [(s.service, s.action) for s in steps] == [(PREFILL, "start"), (DECODE, "keep"), (ROUTER, "keep")]
    assert "kept by --no-recreate" in steps[0].reason and "kept by --no-recreate" in steps[1].reason


def test_a_missing_worker_is_created_before_a_changed_one_is_recreated(monkeypatch):
    steps = _plan(monkeypatch, [C(DECODE, config_hash=OLD[DECODE]), C(ROUTER, config_hash=OLD[ROUTER])],
                  {PREFILL: "p-new", DECODE: "d-new", ROUTER: "r-new"})
    assert [(s.service, s.action) for s in steps] == [
        (PREFILL, "create"), (DECODE, "recreate"), (ROUTER, "recreate")]


def test_an_image_rebuilt_under_the_same_tag_recreates_its_service(monkeypatch):
    containers = [C(s, config_hash=OLD[s], image_id="sha256:old") for s in (PREFILL, DECODE, ROUTER)]
    steps = _plan(monkeypatch, containers, OLD, image_ids={PREFILL: "sha256:new", DECODE: "sha256:old"})
    assert {(s.service, s.action) for s in steps} == {(PREFILL, "recreate"), (DECODE, "keep"), (ROUTER, "keep")}
    assert "rebuilt under the same tag" in next(s.reason for s in steps if s.service == PREFILL)


def test_converge_brings_each_service_up_alone_never_touching_the_router(monkeypatch):
    engine, stack = _stack(monkeypatch, [C(s, config_hash=OLD[s]) for s in (PREFILL, DECODE, ROUTER)])
    steps = reconcile.plan(stack.states(), {PREFILL: "p-new", DECODE: "d-new", ROUTER: OLD[ROUTER]}, EXPECTED,
                           servers=SERVERS)
    reconcile.converge(stack, steps)
    # --no-deps (dependencies False) for each: compose never stops the router to recreate a worker.
    assert engine.ups == [([DECODE], False, True), ([PREFILL], False, True)]


def test_roll_back_restores_the_files_and_recreates_what_it_changed_and_restarts_what_ran(monkeypatch, tmp_path):
    env, record, new_file = tmp_path / "rendered.env", tmp_path / "launch.json", tmp_path / "decode.env"
    env.write_text("SIM_TPOT_MS=40\n")
    record.write_text('{"env": {"SIM_TPOT_MS": "40"}}\n')
    snapshot = reconcile.Snapshot.of([env, record, new_file])
    env.write_text("\n")
    record.write_text("{}\n")
    new_file.write_text("X=1\n")
    # The reconcile was interrupted while prefill was being replaced: decode no longer runs.
    engine, stack = _stack(monkeypatch, [C(PREFILL, state="created", health=None), C(DECODE, state="exited"),
                                         C(ROUTER)])
    steps = [reconcile.Step(PREFILL, "recreate", "changed"), reconcile.Step(DECODE, "keep", "running"),
             reconcile.Step(ROUTER, "keep", "running")]
    headline = reconcile.roll_back(stack, snapshot, steps, running_before={DECODE, ROUTER})
    assert env.read_text() == "SIM_TPOT_MS=40\n" and record.read_text() == '{"env": {"SIM_TPOT_MS": "40"}}\n'
    assert not new_file.exists()
    assert engine.ups == [([PREFILL], False, True), ([DECODE], False, True)]
    # The fake engine's containers do not change: the headline must say decode is not running.
    assert headline.startswith("reconcile rolled back (prefill back on the previous configuration), but not "
                               "running again: decode")


def test_roll_back_says_everything_runs_when_it_does(monkeypatch, tmp_path):
    engine, stack = _stack(monkeypatch, [C(PREFILL), C(DECODE), C(ROUTER)])
    headline = reconcile.roll_back(stack, reconcile.Snapshot.of([]), [reconcile.Step(DECODE, "recreate", "x")],
                                   running_before={PREFILL, DECODE, ROUTER})
    assert headline == ("reconcile rolled back (decode back on the previous configuration): every service that "
                        "was running before runs")
    assert engine.ups == [([DECODE], False, True)]


class _Converging:
    """A converge running in the background (BackgroundUp's face) until the stack's 4th poll."""

    def __init__(self, stack):
        self.stack = stack

    def done(self):
        return self.stack.n >= 4

    def raise_if_failed(self):
        pass


def test_a_worker_unhealthy_before_its_recreation_is_judged_on_its_new_container(monkeypatch):
    # CI, 2026-12-03: prefill (stopped) was recreated first; decode's old container, still to be replaced
    # and answering 503 while it shut down, was unhealthy meanwhile. That ended the wait as a failure.
    from bundle.stack import ready

    monkeypatch.setattr(ready, "POLL_SECONDS", 0)
    monkeypatch.setattr(ready, "front_door_state", lambda front, **kw: (True, "/readiness: HTTP 200"))
    monkeypatch.setattr(ready, "first_generation", lambda front, prompt: "Paris")
    polls = [[(PREFILL, "running", "starting"), (DECODE, "running", "unhealthy"), (ROUTER, "running", "healthy")],
             [(PREFILL, "running", "healthy"), (DECODE, "running", "unhealthy"), (ROUTER, "running", "healthy")],
             [(PREFILL, "running", "healthy"), (DECODE, "running", "starting"), (ROUTER, "running", "healthy")],
             [(PREFILL, "running", "healthy"), (DECODE, "running", "healthy"), (ROUTER, "running", "healthy")],
             [(PREFILL, "running", "healthy"), (DECODE, "running", "healthy"), (ROUTER, "running", "healthy")]]
    stack = ReconcilingStack(polls)
    result = ready.wait_ready(stack, PD, SimpleNamespace(url="http://x", redact=str), timeout=60,
                              prompt="?", expected_services=EXPECTED, report=lambda line: None,
                              starting=_Converging(stack), returning={PREFILL, DECODE})
    # Ready on the poll where the converge is done (the 4th), decode healthy on its new container.
    assert result.generation_text == "Paris" and stack.n == 4


def test_a_worker_still_unhealthy_once_the_converge_is_done_fails_the_wait(monkeypatch):
    from bundle.stack import ready
    from bundle.stack.ready import NotReady

    monkeypatch.setattr(ready, "POLL_SECONDS", 0)
    polls = [[(PREFILL, "running", "healthy"), (DECODE, "running", "unhealthy"), (ROUTER, "running", "healthy")]] * 6
    stack = ReconcilingStack(polls)
    with pytest.raises(NotReady, match="decode.*turned unhealthy"):
        ready.wait_ready(stack, PD, SimpleNamespace(url="http://x", redact=str), timeout=60, prompt="?",
                         expected_services=EXPECTED, report=lambda line: None, starting=_Converging(stack),
                         returning={PREFILL, DECODE})
    assert stack.n == 4  # the converge ended on the 4th poll: judged then, not before


def test_a_worker_stopped_by_its_own_recreation_is_not_a_failure_and_ready_waits_for_converge(monkeypatch):
    from bundle.stack import ready

    monkeypatch.setattr(ready, "POLL_SECONDS", 0)
    monkeypatch.setattr(ready, "front_door_state", lambda front, **kw: (True, "/readiness: HTTP 200"))
    generations = []
    monkeypatch.setattr(ready, "first_generation", lambda front, prompt: generations.append(1) or "Paris")
    polls = [[(PREFILL, "running", "healthy"), (DECODE, "running", "healthy"), (ROUTER, "running", "healthy")],
             [(PREFILL, "exited", ""), (DECODE, "running", "healthy"), (ROUTER, "running", "healthy")],
             [(PREFILL, "exited", ""), (DECODE, "running", "healthy"), (ROUTER, "running", "unhealthy")],
             [(PREFILL, "running", "starting"), (DECODE, "running", "healthy"), (ROUTER, "running", "unhealthy")],
             [(PREFILL, "running", "healthy"), (DECODE, "running", "healthy"), (ROUTER, "running", "healthy")]]
    stack = ReconcilingStack(polls)
    result = ready.wait_ready(stack, PD, SimpleNamespace(url="http://x", redact=str), timeout=60,
                              prompt="?", expected_services=EXPECTED, report=lambda line: None,
                              starting=_Converging(stack), returning={PREFILL})
    # Not ready on the first poll (everything healthy, but on the old configuration), no failure
    # for prefill's stop while it was replaced: ready on the poll after the converge ended.
    assert result.generation_text == "Paris" and len(generations) == 1 and stack.n == 5
