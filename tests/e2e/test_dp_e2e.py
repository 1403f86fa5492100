"""The dp topology end to end on the rehearsal: two replicas behind the real router, validated,
rendered, launched, smoke-tested (the workers' own counters prove the router reached both), then
one replica's server process killed with SIGKILL from the host (as an OOM kill or a crash does):
the router keeps serving from the other, Docker restarts the killed one, and down leaves nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from bundle.cli import main
from bundle.stack import docker
from tests.conftest import compose_project, write_config
from tests.sim_process import free_port

# Each test launches its own rehearsal (it breaks or takes down its stack): the image first.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("rehearsal_image"),
              pytest.mark.timeout(600)]


@pytest.fixture
def project(runs_dir):
    with compose_project("dp") as name:
        yield name


def _host_pid(project: str, service: str) -> int:
    cid = subprocess.run(["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project={project}",
                          "--filter", f"label=com.docker.compose.service={service}"],
                         capture_output=True, text=True, check=True).stdout.split()[0]
    return int(subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", cid], capture_output=True,
                              text=True, check=True).stdout)


def test_dp_serves_from_both_replicas_survives_a_sigkill_and_goes_down_cleanly(tmp_path, project, capsys):
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {free_port()}\n")
    assert main(["validate", "dp", "-c", str(config)]) == 0
    assert main(["render", "dp", "-c", str(config)]) == 0
    assert main(["launch", "dp", "--rehearsal", "sim", "-c", str(config)]) == 0
    capsys.readouterr()
    assert main(["smoke", "dp", "-c", str(config), "--json"]) == 0
    out = capsys.readouterr().out
    assert "replica-0 counted" in out and "replica-1 counted" in out

    os.kill(_host_pid(f"{project}-dp", "replica-0"), signal.SIGKILL)
    killed = time.monotonic()
    first_pass = None
    while time.monotonic() - killed < 60:
        capsys.readouterr()
        if main(["smoke", "dp", "-c", str(config)]) == 0:
            first_pass = time.monotonic() - killed
            break
        time.sleep(1)
    assert first_pass is not None and first_pass < 30, "smoke did not pass again within 30 s of the kill"

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
