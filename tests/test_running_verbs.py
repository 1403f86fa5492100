"""`bundle status` and `bundle smoke` in-process: the project's containers come from a scripted python-on-whales client
(tests/fake_docker.py) under the driver's real Stack and launch record; the server behind the
container is a real worker simulator on 127.0.0.1, read with the real curl that `compose exec` would
run inside it, and the front door is that simulator too. A healthy tp4, a paused server, a hung one
(the simulator's own hang), and nothing running."""

from __future__ import annotations

import json
import time

import pytest
import requests

from bundle.cli import main
from bundle.service import status
from bundle.stack import engine as docker_engine
from bundle.stack import runstate
from tests.conftest import write_config
from tests.fake_docker import C, FakeEngine
from tests.sim_process import simulator


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with simulator(tmp_path_factory.mktemp("sim")) as (base, _proc, _log):
        yield base


@pytest.fixture
def launched(tmp_path, runs_dir, sim, monkeypatch):
    """A recorded tp4 launch of project st-tp4 whose front door and server are the simulator."""
    port = int(sim.rsplit(":", 1)[1])
    cfg = write_config(tmp_path, f"project: st\nmodel:\n  served_name: dsv4\nnetwork:\n  front_port: {port}\n")
    run_dir = runstate.new_run_dir("st-tp4", "launch")
    runstate.save(runstate.LaunchRecord(project="st-tp4", topology="tp4", compose_files=["compose/tp4.yaml"],
                                        env_file=str(tmp_path / "bundle.env"), mode="sim", config=str(cfg),
                                        started_at=time.time(), run_dir=str(run_dir),
                                        env={"BUNDLE_TOPOLOGY": "tp4"}))

    def engine(*containers: C) -> FakeEngine:
        fake = FakeEngine("st-tp4", [list(containers)], ports={"server": port})
        monkeypatch.setattr(docker_engine, "client", fake.client)
        return fake

    return cfg, engine


def _status(cfg, capsys) -> dict:
    capsys.readouterr()
    assert main(["status", "tp4", "-c", str(cfg), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_healthy_tp4_serves_and_its_server_answers(launched, capsys):
    cfg, engine = launched
    engine(C("server", ports={"30000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "30000"}]}))
    report = _status(cfg, capsys)
    assert report["project"] == "st-tp4" and report["rehearsal"] == "sim"
    (server,) = report["containers"]
    assert server == {"service": "server", "name": "st-tp4-server-1", "state": "running", "health": "healthy",
                      "restarts": 0, "exit_code": 0, "ports": {"30000/tcp": ["127.0.0.1:30000"]}, "problem": None,
                      "processes": []}
    door = report["front_door"]
    assert door["serving"] is True
    assert door["detail"] == "/health: HTTP 200; a one-token generation: HTTP 200"


def test_a_paused_server_is_named_as_frozen(launched, capsys):
    cfg, engine = launched
    fake = engine(C("server", state="paused"))
    (server,) = _status(cfg, capsys)["containers"]
    assert server["problem"].startswith("paused: its processes are frozen")
    assert "exec server" not in fake.calls  # a frozen container is not asked: it could not answer


def test_a_hung_server_is_flagged_and_the_front_door_does_not_serve(launched, sim, capsys, monkeypatch):
    cfg, engine = launched
    # Short bounds here only: a hang never answers, and a busy machine must not fail the healthy tests.
    monkeypatch.setattr(status, "WORKER_PROBE_SECONDS", 1)
    monkeypatch.setattr(status, "FRONT_PROBE_SECONDS", 2)
    engine(C("server"))
    requests.post(sim + "/sim/faults", json={"hang": True}, timeout=10).raise_for_status()
    try:
        report = _status(cfg, capsys)
    finally:
        requests.post(sim + "/sim/faults", json={"hang": False}, timeout=30).raise_for_status()
    (server,) = report["containers"]
    assert server["problem"] == "hung: /health gave no answer within 1 s"
    assert report["front_door"]["serving"] is False
    assert report["front_door"]["detail"] == "/health: ReadTimeout"


def test_the_table_shows_each_container_and_the_front_door(launched, capsys):
    cfg, engine = launched
    engine(C("server", restarts=2))
    capsys.readouterr()
    assert main(["status", "tp4", "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "st-tp4 (tp4, rehearsal: sim)" in out and "server" in out and "healthy" in out
    assert "serving" in out and "not serving" not in out


def test_nothing_running_says_so(launched, capsys):
    cfg, engine = launched
    engine()
    capsys.readouterr()
    assert main(["status", "-c", str(cfg)]) == 0
    assert "nothing is running (no launched topology has containers)" in capsys.readouterr().out


def test_smoke_passes_on_a_right_server_and_writes_its_report(launched, capsys):
    cfg, engine = launched
    engine(C("server"))
    capsys.readouterr()
    assert main(["smoke", "tp4", "-c", str(cfg), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads(max(runstate.project_dir("st-tp4").glob("*-smoke/smoke.json")).read_text())
    assert printed == saved
    assert saved["ok"] and saved["project"] == "st-tp4" and saved["model"] == "dsv4" and saved["rehearsal"]
    assert all(step["ok"] for step in saved["steps"]) and len(saved["steps"]) >= 4


def test_smoke_fails_naming_the_wrong_answer(launched, sim, capsys):
    cfg, engine = launched
    engine(C("server"))
    requests.post(sim + "/sim/faults", json={"wrong_answers": True}, timeout=10).raise_for_status()
    try:
        capsys.readouterr()
        assert main(["smoke", "tp4", "-c", str(cfg)]) == 1
    finally:
        requests.post(sim + "/sim/faults", json={"wrong_answers": False}, timeout=10).raise_for_status()
    err = capsys.readouterr().err
    assert "smoke test of tp4 failed" in err and "'Paris'" in err
    assert not json.loads(max(runstate.project_dir("st-tp4").glob("*-smoke/smoke.json")).read_text())["ok"]


def test_smoke_with_nothing_running_names_the_fix(launched, capsys):
    cfg, engine = launched
    engine()
    capsys.readouterr()
    assert main(["smoke", "tp4", "-c", str(cfg)]) != 0
    err = capsys.readouterr().err
    assert "nothing to smoke-test: st-tp4 is not running" in err and "bundle launch tp4" in err
