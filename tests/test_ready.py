"""Launch's readiness loop (bundle.stack.ready.wait_ready), in-process: the containers' states come
from a scripted python-on-whales client (tests/fake_docker.py) under the driver's real Stack, and the
front door is a real worker simulator on 127.0.0.1 (tests/sim_process.py) answering the real
requests (health, one generation). Each ending the loop knows: ready, a crash, a container turned
unhealthy, a crash loop, a timeout, containers that never appeared, a failed `compose up`, and the
wait on a router's own healthcheck after the first generation."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundle import topology as registry
from bundle.errors import EXIT_FAILED, EXIT_TIMEOUT, BundleError
from bundle.stack import docker, ready
from bundle.stack import engine as docker_engine
from bundle.stack.frontdoor import FrontDoor
from tests.fake_docker import C, FakeEngine
from tests.sim_process import simulator

PROMPT = "What is the capital of France?"
LOADING = ("Load weight begin, avail mem=90.1 GB",)
SERVING = ("Load weight end. type=DeepseekV4ForCausalLM", "The server is fired up and ready to roll!")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """One worker simulator for the module: the front door every test asks."""
    with simulator(tmp_path_factory.mktemp("sim")) as (base, _proc, _log):
        yield base


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch):
    monkeypatch.setattr(ready, "POLL_SECONDS", 0.0)


def _wait(monkeypatch, engine: FakeEngine, topology: str, front: FrontDoor, *, timeout: float = 30.0,
          starting: bool = False, expected: set[str] | None = None):
    monkeypatch.setattr(docker_engine, "client", engine.client)
    stack = docker.Stack(engine.project, [Path("unused.yaml")], Path("unused.env"))
    topo = registry.get(topology)
    lines: list[str] = []
    up = ready.BackgroundUp(stack) if starting else None
    if up is not None:
        up.join(timeout=5)
    result = ready.wait_ready(stack, topo, front, timeout=timeout, prompt=PROMPT,
                              expected_services=expected or {s.name for s in topo.active_services()},
                              report=lines.append, starting=up)
    return result, lines


def _door(sim: str, path: str = "/health") -> FrontDoor:
    return FrontDoor(url=sim, model="dsv4", readiness_path=path)


def test_tp4_is_ready_after_health_and_one_real_generation_with_its_milestones(monkeypatch, sim):
    engine = FakeEngine("p-tp4", [[C("server", health="starting", logs=LOADING)],
                                  [C("server", health="starting", logs=SERVING[:1])],
                                  [C("server", logs=SERVING[1:])]])
    result, lines = _wait(monkeypatch, engine, "tp4", _door(sim))
    assert "Paris" in result.generation_text
    assert [v.service for v in result.services] == ["server"] and result.services[0].milestone == "serving"
    said = "\n".join(lines)
    assert "server: running, starting, loading weights" in said
    assert "server: running, starting, weights loaded" in said
    assert "server: running, healthy, serving" in said
    assert "first generation through the front door: " in said
    assert result.events == lines


def test_a_server_that_exits_is_named_with_its_exit_code_milestone_and_fatal_line(monkeypatch, sim):
    engine = FakeEngine("p-tp4", [[C("server", health="starting", logs=LOADING)],
                                  [C("server", state="exited", health="unhealthy", exit_code=1,
                                     logs=("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",))]])
    with pytest.raises(ready.NotReady) as caught:
        _wait(monkeypatch, engine, "tp4", _door(sim))
    assert caught.value.exit_code == EXIT_FAILED
    assert caught.value.message == ("server exited (exit code 1) after 'loading weights': "
                                    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB")


def test_an_exit_code_the_state_forgot_comes_from_the_engines_events(monkeypatch, sim):
    # A restarted container runs again with exit code 0; the engine's "die" event kept the 137.
    engine = FakeEngine("p-tp4", [[C("server", health="starting")]]
                        + [[C("server", state="restarting", health="starting", exit_code=0, restarts=r)]
                           for r in (1, 2, 3)], exits=[("server", 137)])
    with pytest.raises(ready.NotReady) as caught:
        _wait(monkeypatch, engine, "tp4", _door(sim))
    assert caught.value.message.startswith("server crashed and was restarted (exit code 137)")


def test_one_restart_alone_is_left_to_the_restart_policy(monkeypatch, sim):
    engine = FakeEngine("p-tp4", [[C("server", health="starting")],
                                  [C("server", state="restarting", health="starting", restarts=1)],
                                  [C("server", health="starting", restarts=1)],
                                  [C("server", restarts=1, logs=SERVING)]])
    result, lines = _wait(monkeypatch, engine, "tp4", _door(sim))
    assert "Paris" in result.generation_text
    assert "server: restarting, starting, restarted 1x" in lines[1]


def test_a_worker_turning_unhealthy_ends_the_wait_at_once(monkeypatch, sim):
    engine = FakeEngine("p-pd", [[C("prefill", health="starting"), C("decode", health="starting"),
                                  C("router", health="starting")],
                                 [C("prefill", health="unhealthy"), C("decode", health="starting"),
                                  C("router", health="starting")]])
    with pytest.raises(ready.NotReady) as caught:
        _wait(monkeypatch, engine, "pd", _door(sim))
    assert caught.value.message == "prefill turned unhealthy"
    assert engine.polls == 2  # no further poll: it did not wait for the timeout
    assert {v.service: v.health for v in caught.value.services}["prefill"] == "unhealthy"


def test_the_first_failure_is_the_headline_when_the_router_follows(monkeypatch, sim):
    engine = FakeEngine("p-pd", [[C("prefill"), C("decode"), C("router", health="starting")],
                                 [C("prefill"), C("decode", state="restarting", restarts=1, exit_code=0,
                                                  logs=("Traceback (most recent call last):",)),
                                  C("router", health="starting")],
                                 [C("prefill"), C("decode", restarts=1, health="starting"),
                                  C("router", health="unhealthy")]], exits=[("decode", 1)])
    with pytest.raises(ready.NotReady) as caught:
        _wait(monkeypatch, engine, "pd", _door(sim, "/nowhere"))
    message = caught.value.message
    assert message.startswith("decode crashed and was restarted (exit code 1): Traceback (most recent call last):")
    assert message.endswith("(then router turned unhealthy)")


def test_a_crash_loop_is_called_one_without_waiting_for_the_restart_policy(monkeypatch, sim):
    engine = FakeEngine("p-tp4", [[C("server", state="restarting", health="starting", restarts=r, exit_code=3)]
                                  for r in (1, 2, 3)])
    with pytest.raises(ready.NotReady) as caught:
        _wait(monkeypatch, engine, "tp4", _door(sim))
    # The loop is called at the second restart this wait saw (1 -> 3), the first restart named.
    assert caught.value.message == "server crashed and was restarted (exit code 3)"
    assert engine.polls == 3


def test_a_server_crashing_on_its_first_start_with_an_error_ends_the_wait_at_once(monkeypatch, sim):
    """A start that failed with an error of its own (SGLang refusing a setting) is not worth the restart
    policy's next try, which on the GPU host costs a model load: the first crash ends the wait."""
    refused = ("Traceback (most recent call last):", "ValueError: --kv-cache-dtype bf16 is not supported")
    engine = FakeEngine("p-tp4", [[C("server", health="starting")],
                                  [C("server", state="restarting", health="starting", restarts=1, exit_code=1,
                                     logs=refused)],
                                  [C("server", state="restarting", health="starting", restarts=2, exit_code=1)]])
    with pytest.raises(ready.NotReady) as caught:
        _wait(monkeypatch, engine, "tp4", _door(sim))
    assert caught.value.message == ("server crashed and was restarted (exit code 1): "
                                    "ValueError: --kv-cache-dtype bf16 is not supported")
    assert engine.polls == 2


def test_a_server_that_served_then_crashed_with_an_error_gets_the_restart_policys_try(monkeypatch, sim):
    # The front door never answers here (its path is wrong): the wait ends at its deadline, not at the crash.
    engine = FakeEngine("p-tp4", [[C("server", health="healthy")],
                                  [C("server", state="restarting", health="starting", restarts=1, exit_code=1,
                                     logs=("RuntimeError: NCCL timeout",))],
                                  [C("server", restarts=1, health="healthy")]])
    with pytest.raises(ready.NotReady) as caught:
        _wait(monkeypatch, engine, "tp4", _door(sim, "/nowhere"), timeout=2)
    assert caught.value.message.startswith("not ready after 2 s") and engine.polls > 2


def test_a_server_that_never_gets_healthy_times_out_naming_where_each_stands(monkeypatch, sim):
    engine = FakeEngine("p-tp4", [[C("server", health="starting", logs=LOADING)]])
    with pytest.raises(ready.NotReady) as caught:
        _wait(monkeypatch, engine, "tp4", _door(sim), timeout=0.3)
    assert caught.value.exit_code == EXIT_TIMEOUT
    assert caught.value.message == "not ready after 0 s (server: running, starting, loading weights)"
    assert "launch_timeout" in caught.value.hint


def test_containers_that_never_appear_are_named_once_compose_up_is_done(monkeypatch, sim):
    engine = FakeEngine("p-pd", [[C("prefill"), C("router", health="starting")]])
    with pytest.raises(ready.NotReady) as caught:
        _wait(monkeypatch, engine, "pd", _door(sim), starting=True)
    assert caught.value.message == "containers never appeared: decode"
    assert engine.calls[0] == "up"


def test_a_failed_compose_up_is_raised_as_its_error(monkeypatch, sim):
    from python_on_whales.exceptions import DockerException

    failure = DockerException(["docker", "compose", "up"], 1, b"", b"port is already allocated")
    engine = FakeEngine("p-tp4", [[C("server", health="starting")]], up_error=failure)
    with pytest.raises(BundleError) as caught:
        _wait(monkeypatch, engine, "tp4", _door(sim), starting=True)
    assert "docker compose up failed for project 'p-tp4'" in caught.value.message
    assert "port is already allocated" in caught.value.message


def test_ready_waits_for_the_routers_own_healthcheck_after_the_first_generation(monkeypatch, sim):
    servers = [C("prefill"), C("decode")]
    engine = FakeEngine("p-pd", [servers + [C("router", health="starting")]] * 3
                        + [servers + [C("router")]])
    result, lines = _wait(monkeypatch, engine, "pd", _door(sim))
    said = "\n".join(lines)
    assert "waiting on the healthcheck of router" in said
    assert said.index("first generation through the front door") < said.index("waiting on the healthcheck")
    assert engine.polls == 4 and {v.service: v.health for v in result.services}["router"] == "healthy"


def test_a_router_counting_fewer_healthy_workers_than_needed_is_not_ready(monkeypatch, sim):
    """smg's /readiness says how many workers it has; dp is ready only with every replica."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import json
    import threading

    class Readiness(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"status": "ready", "healthy_workers": 1}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Readiness)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        door = FrontDoor(url=f"http://127.0.0.1:{server.server_port}", model="dsv4", readiness_path="/readiness")
        assert ready.front_door_state(door, workers=2) == (False, "/readiness: HTTP 200, 1 of 2 workers healthy")
        assert ready.front_door_state(door, workers=1) == (True, "/readiness: HTTP 200, 1 of 1 workers healthy")
    finally:
        server.shutdown()
    assert ready.front_door_state(_door(sim), workers=2)[0]  # a bare 200 (no counts) says all it can
