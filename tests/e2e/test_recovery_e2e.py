"""Recovery and faults on the rehearsal, through the driver, injected the way they happen:

- a service stopped by an operator (`docker kill`: Docker then skips its restart policy by design)
  is brought back by `bundle launch`, which reconciles as `docker compose up` does, and smoke passes;
- a frozen decode worker (its processes stopped, as a hang looks from outside) fails requests within
  the configured request timeout, and `bundle status` flags it and says the front door does not serve;
- `bundle down` needs no topology: it takes down the one that was launched;
- a crash loop's headline names the crashing service, its exit code and its last fatal line.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import requests

from bundle.cli import main
from bundle.stack import docker
from tests.conftest import compose_project, write_config
from tests.e2e.host_faults import freeze, thaw
from tests.sim_process import free_port

# Each test launches its own rehearsal (it breaks or takes down its stack): the image first.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("rehearsal_image"),
              pytest.mark.timeout(600)]
REQUEST_TIMEOUT = 12  # pd.router.request_timeout_secs of these tests


@pytest.fixture
def project(runs_dir):
    with compose_project("recover") as name:
        yield name


def _container(project: str, service: str) -> str:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}",
                          "--filter", f"label=com.docker.compose.service={service}"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out, f"no {service} container in {project}"
    return out[0]


def _status(config, capsys, topology="pd") -> dict:
    capsys.readouterr()
    assert main(["status", topology, "-c", str(config), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _chat(front: str, timeout: float) -> requests.Response:
    return requests.post(front + "/v1/chat/completions", timeout=timeout, json={
        "model": "deepseek-v4-flash", "max_tokens": 4, "temperature": 0,
        "messages": [{"role": "user", "content": "What is the capital of France?"}]})


def test_stopped_services_come_back_with_launch_and_a_frozen_decode_fails_fast(tmp_path, project, capsys):
    port = free_port()
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {port}\n"
                                    f"pd:\n  router:\n    request_timeout_secs: {REQUEST_TIMEOUT}\n")
    assert main(["launch", "pd", "--rehearsal", "sim", "-c", str(config)]) == 0
    front = f"http://127.0.0.1:{port}"
    pd_project = f"{project}-pd"

    # An operator's `docker kill` of prefill and of the router: no restart policy brings them back.
    for service in ("prefill", "router"):
        subprocess.run(["docker", "kill", _container(pd_project, service)], check=True,
                       capture_output=True)
    time.sleep(3)
    states = {c["service"]: c["state"] for c in _status(config, capsys)["containers"]}
    assert states["prefill"] == "exited" and states["router"] == "exited"
    decode_before = _container(pd_project, "decode")
    capsys.readouterr()
    assert main(["launch", "pd", "--rehearsal", "sim", "-c", str(config)]) == 0
    out = capsys.readouterr().out
    assert "reconciling pd" in out and "ready in" in out
    assert _container(pd_project, "decode") == decode_before  # the healthy one was left alone
    assert main(["smoke", "-c", str(config)]) == 0  # no topology named: the one that is up

    # Decode frozen (every process of it stopped): requests fail within the request timeout, and
    # status flags it while the front door is not serving.
    freeze(_container(pd_project, "decode"))
    try:
        started = time.monotonic()
        reply = _chat(front, timeout=REQUEST_TIMEOUT * 4)
        took = time.monotonic() - started
        assert reply.status_code != 200
        # smg keeps its own budget: its hung-attempt timings measured on this box ran 0.05-0.08 s over
        # at load 8-15 (tests/test_simulator_router.py); 5 s covers that and the port forward many times.
        assert took <= REQUEST_TIMEOUT + 5, f"a request to a frozen decode took {took:.1f} s"
        status = _status(config, capsys)
        decode = next(c for c in status["containers"] if c["service"] == "decode")
        assert decode["problem"] and "paused" in decode["problem"]
        assert status["front_door"]["serving"] is False
    finally:
        thaw(_container(pd_project, "decode"))

    # Down with no topology and no config: the launch records say which project is up.
    capsys.readouterr()
    assert main(["down"]) == 0
    assert f"{pd_project}: removed" in capsys.readouterr().out
    assert docker.project_containers(pd_project) == []


def test_a_crash_loop_names_the_crashing_service_its_exit_code_and_fatal_line(tmp_path, project, capsys):
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {free_port()}\n")
    # Prefill crashes on every first generation (the readiness check's), restarts, crashes again.
    code = main(["launch", "pd", "--rehearsal", "sim", "-c", str(config), "--timeout", "4m",
                 "--sim", "SIM_PREFILL_CRASH_AFTER_REQUESTS=1"])
    assert code != 0
    err = capsys.readouterr().err
    headline = err.split("did not become ready: ", 1)[1].splitlines()[0]
    assert headline.startswith("prefill "), headline
    assert "exit code 1" in headline and "crashing on generation" in headline
    assert "\x1b[" not in err
    assert docker.project_containers(f"{project}-pd") == []
