"""`bundle launch --rehearsal` end to end on a real Docker engine, worker simulators for servers: ready with progress, recorded, status,
a malformed config that leaves a running stack alone, down that keeps volumes; and a launch that
times out keeps its logs, stops what it started and exits non-zero."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from bundle.rehearsal.shared import env as rehearsal
from bundle.stack import docker
from bundle.stack import runstate
from bundle.cli import main
from bundle.errors import EXIT_CONFIG, EXIT_TIMEOUT
from tests.conftest import write_config
from tests.sim_process import free_port

# Each test launches its own rehearsal (it breaks or takes down its stack): the image first.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("rehearsal_image"),
              pytest.mark.timeout(600)]


def _inspect(kind: str, name: str) -> bool:
    return subprocess.run(["docker", kind, "inspect", name], capture_output=True).returncode == 0


def _container_ids(project: str) -> list[str]:
    out = subprocess.run(["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project={project}"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(out.split())


@pytest.fixture
def project(runs_dir):
    name = f"launch-{uuid.uuid4().hex[:6]}"
    yield name
    for topology in ("tp4", "pd"):  # whatever a failed assertion left behind
        subprocess.run(["docker", "compose", "-p", f"{name}-{topology}", "down", "-v", "--remove-orphans"],
                       capture_output=True)
    subprocess.run(["docker", "volume", "rm", "-f", *_volumes(name)], capture_output=True)


def _volumes(prefix: str) -> list[str]:
    out = subprocess.run(["docker", "volume", "ls", "-q", "--filter", f"name={prefix}"],
                         capture_output=True, text=True).stdout
    return out.split()


@pytest.mark.parametrize("topology", ["tp4", "pd"])
def test_launch_is_ready_recorded_untouched_by_bad_config_and_down_keeps_volumes(
        tmp_path, project, topology, capsys, monkeypatch):
    # The router's first healthcheck runs one interval after it starts; by then its workers are
    # paired and the front door serves. "Ready" must still wait for it, or status (and docker ps)
    # says "starting" right after launch said ready.
    monkeypatch.setitem(rehearsal.FAST_HEALTH, "ROUTER_HEALTHCHECK_INTERVAL", "12s")
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {free_port()}\n")
    assert main(["launch", topology, "--rehearsal", "sim", "-c", str(config)]) == 0
    out = capsys.readouterr().out
    if topology == "pd":
        assert "waiting on the healthcheck of router" in out
    assert "first generation through the front door" in out and "ready in" in out
    assert "loading weights" in out  # progress followed the servers' log milestones
    assert "endpoint: http://127.0.0.1:" in out and "curl -s" in out
    compose_project = f"{project}-{topology}"
    record = runstate.load(compose_project)
    assert record.mode and record.topology == topology
    ready = json.loads((runstate.Path(record.run_dir) / "ready.json").read_text())
    assert ready["seconds"] > 0 and ready["events"]

    assert main(["status", topology, "-c", str(config), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["front_door"]["serving"] is True
    assert {c["service"] for c in status["containers"]} == ({"server"} if topology == "tp4"
                                                            else {"prefill", "decode", "router"})
    assert all(c["health"] == "healthy" for c in status["containers"])

    # A malformed config for the same project: refused before anything, the running stack untouched.
    before = _container_ids(compose_project)
    bad = write_config(tmp_path, f"project: {project}\nlevers:\n  cuda_graph: false\n", name="bad.yaml")
    assert main(["launch", topology, "--rehearsal", "sim", "-c", str(bad)]) == EXIT_CONFIG
    assert "did you mean 'cuda_graphs'" in capsys.readouterr().err
    assert _container_ids(compose_project) == before

    volume = f"{project}-jit-"
    assert main(["down", topology, "-c", str(config)]) == 0
    assert docker.project_containers(compose_project) == []
    network = f"{compose_project}_pd" if topology == "pd" else f"{compose_project}_default"
    assert not _inspect("network", network)
    assert any(v.startswith(volume) for v in _volumes(volume)), "down without --volumes keeps the cache"


def test_a_launch_whose_server_prints_a_long_progress_bar_during_the_wait_reaches_ready(tmp_path, project, capsys):
    """SGLang's weight-loading bar, ~150 KB of "\\r" rewrites before its newline spread over 12 s of
    load: Docker's log copier flushes it in stamped 16 KB pieces, and the readiness wait polls every
    2 s inside it. On landed main 17abb57 such a poll ended launch in a traceback (a bar's first word
    read as a timestamp); now the wait reads through it to ready."""
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {free_port()}\n")
    assert main(["launch", "tp4", "--rehearsal", "sim", "-c", str(config), "--timeout", "5m",
                 "--sim", "SIM_LOAD_SECONDS=12", "--sim", "SIM_LOAD_BAR_UPDATES=1500"]) == 0
    captured = capsys.readouterr()
    assert "loading weights" in captured.out and "ready in" in captured.out
    assert "Traceback" not in captured.out + captured.err
    # The condition held: the server's log has one line over 16 KB, in several stamped pieces.
    raw = subprocess.run(["docker", "logs", "--timestamps", f"{project}-tp4-server-1"], capture_output=True,
                         check=True).stderr.decode(errors="replace")
    bar = max(raw.split("\n"), key=len)
    assert len(bar) > 16384 and "Multi-thread loading shards" in bar
    assert bar.count("Z ") >= 2, "Docker flushed the bar in stamped pieces"
    assert main(["down", "tp4", "-c", str(config)]) == 0


def test_a_launch_that_times_out_keeps_logs_and_stops_what_it_started(tmp_path, project, capsys):
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {free_port()}\n")
    code = main(["launch", "tp4", "--rehearsal", "sim", "-c", str(config), "--timeout", "25s",
                 "--sim", "SIM_LOAD_SECONDS=600"])
    assert code == EXIT_TIMEOUT
    err = capsys.readouterr().err
    assert "did not become ready: not ready after 25 s" in err
    logs = sorted((tmp_path / "runs" / f"{project}-tp4").glob("*-launch/logs/server.log"))
    assert logs, "the failed launch's logs are kept on disk"
    state = json.loads((logs[-1].parent / "server.state.json").read_text())
    assert state["state"] == "running" and state["health"] == "starting"  # as it was when given up
    assert docker.project_containers(f"{project}-tp4") == []


def test_a_worker_that_crashes_at_start_fails_the_launch_with_its_reason(tmp_path, project, capsys):
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {free_port()}\n"
                                    f"lifecycle:\n  restart: 'no'\n")
    code = main(["launch", "tp4", "--rehearsal", "sim", "-c", str(config), "--timeout", "5m",
                 "--sim", "SIM_CRASH_AFTER_REQUESTS=1"])
    assert code != 0
    err = capsys.readouterr().err
    assert "server exited" in err or "server turned unhealthy" in err
    assert docker.project_containers(f"{project}-tp4") == []
