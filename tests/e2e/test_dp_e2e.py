"""The dp topology end to end on the rehearsal (worker simulators behind the real router): two
replicas validated, rendered, launched, smoke-tested (each replica generates a request sent straight
to it inside the network, and the router lists both healthy), then
one replica's server process killed with SIGKILL from the host (as an OOM kill or a crash does):
the router keeps serving from the other, Docker restarts the killed one, and down leaves nothing."""

from __future__ import annotations

import json
import time

import pytest

from bundle.cli import main
from bundle.stack import docker
from tests.conftest import compose_project, write_config
from tests.e2e.host_faults import sigkill
from tests.sim_process import free_port

# Each test launches its own rehearsal (it breaks or takes down its stack): the image first.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("rehearsal_image"),
              pytest.mark.timeout(600)]


@pytest.fixture
def project(runs_dir):
    with compose_project("dp") as name:
        yield name


def test_dp_serves_from_both_replicas_survives_a_sigkill_and_goes_down_cleanly(tmp_path, project, capsys):
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {free_port()}\n")
    assert main(["validate", "dp", "-c", str(config)]) == 0
    assert main(["render", "dp", "-c", str(config)]) == 0
    assert main(["launch", "dp", "--rehearsal", "sim", "-c", str(config)]) == 0
    capsys.readouterr()
    assert main(["smoke", "dp", "-c", str(config), "--json"]) == 0
    steps = {s["name"]: s for s in json.loads(capsys.readouterr().out)["steps"]}
    served = steps["every replica serves"]
    assert served["ok"] and "replica-0 generated" in served["detail"] and "replica-1 generated" in served["detail"]
    assert "lists those 2 healthy" in served["detail"], served

    sigkill(f"{project}-dp", "replica-0")
    killed = time.monotonic()
    first_pass = None
    # A budget, not a claim on speed: the killed replica is "down, not counted" at once, but the router
    # may still send a check to it until its health check (5 s) takes it out of rotation.
    while time.monotonic() - killed < 90:
        capsys.readouterr()
        if main(["smoke", "dp", "-c", str(config)]) == 0:
            first_pass = time.monotonic() - killed
            break
        time.sleep(1)
    assert first_pass is not None, "smoke did not pass again within 90 s of the kill"

    # The restart policy brings the killed replica back; then both serve again.
    deadline = time.monotonic() + 120
    while True:
        capsys.readouterr()
        assert main(["status", "dp", "-c", str(config), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        replica = next(c for c in status["containers"] if c["service"] == "replica-0")
        if replica["restarts"] >= 1 and replica["health"] == "healthy" and not replica["problem"]:
            break
        assert time.monotonic() < deadline, f"replica-0 never came back: {replica}"
        time.sleep(2)
    print(f"smoke passed again {first_pass:.1f} s after the SIGKILL")

    assert main(["down", "dp", "-c", str(config)]) == 0
    assert docker.project_containers(f"{project}-dp") == []
