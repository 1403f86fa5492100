"""The CPU engine rehearsal end to end: the pinned SGLang 0.5.23 server itself on CPU, behind the real smg.

One pd run carries every read-only check and the one fault (minutes of CI each, so they share it):
launch (readiness through smg, attestation of what the real server resolved), smoke (every check,
the PD path proven by SGLang's own counters), bench C=1 and C=8 with tiny sizes, decode's main
process SIGKILLed FROM THE HOST (its PID from docker inspect; a `docker kill` is an operator's stop,
for which Docker skips the restart policy), the restart policy bringing it back, smoke again, down.
tp4 runs once: launch, smoke (its greedy answer equals pd's: compared by smoke itself), down.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from bundle.cli import main
from tests.conftest import compose_project, write_config
from tests.sim_process import free_port

pytestmark = pytest.mark.docker
# 12 min: alone on 2 cores pd is ready in about 3.5 min, but `make test` runs another module beside it.
LAUNCH = ["--rehearsal", "engine", "--timeout", "12m"]


@pytest.fixture
def project(runs_dir):
    with compose_project("engine") as name:
        yield name


def _inspect(project: str, service: str) -> dict:
    ids = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}",
                          "--filter", f"label=com.docker.compose.service={service}"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert ids, f"no {service} container in {project}"
    return json.loads(subprocess.run(["docker", "inspect", ids[0]], capture_output=True, text=True,
                                     check=True).stdout)[0]


def _smoke(config, topology, capsys) -> dict:
    capsys.readouterr()
    code = main(["smoke", topology, "-c", str(config), "--json"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    return json.loads(out)


@pytest.mark.timeout(1500)
def test_pd_on_the_real_engine_serves_smokes_benches_and_recovers_from_a_sigkill(tmp_path, project, capsys):
    port = free_port()
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {port}\n")
    pd_project = f"{project}-pd"
    assert main(["launch", "pd", "-c", str(config), *LAUNCH]) == 0

    report = _smoke(config, "pd", capsys)
    steps = {s["name"]: s for s in report["steps"]}
    assert all(s["ok"] for s in report["steps"]), steps
    # The KV path proven by SGLang's own records, not only by the answers: decode received a KV cache
    # for every request it served (smoke's step fails otherwise), over NIXL (decode's own log).
    assert 'decode_transferred' in steps["through prefill and decode"]["detail"]
    decode_log = subprocess.run(["docker", "logs", _inspect(pd_project, "decode")["Id"]], capture_output=True,
                                text=True, check=True)
    assert "NIXL KVManager initialized with backend: UCX" in decode_log.stdout + decode_log.stderr

    capsys.readouterr()
    assert main(["bench", "pd", "-c", str(config), "--concurrency", "1", "8", "--input-len", "16",
                 "--output-len", "8", "--prompts-per-concurrency", "1", "--level-timeout", "5m", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)  # the run's JSON record (indented: the whole of stdout)
    assert [lv["status"] for lv in record["levels"]] == ["ok", "ok"]
    assert all(lv["metrics"]["completed"] == lv["concurrency"] for lv in record["levels"])

    # SIGKILL of decode's main process from the host: a crash to Docker, so its restart policy acts.
    before = _inspect(pd_project, "decode")
    os.kill(before["State"]["Pid"], signal.SIGKILL)
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline:
        now = _inspect(pd_project, "decode")
        if now["RestartCount"] > before["RestartCount"] and now["State"].get("Health", {}).get("Status") == "healthy":
            break
        time.sleep(5)
    else:
        pytest.fail(f"decode did not come back healthy: {now['State']}")
    # The router pairs it again within its health-check interval; smoke then passes on the new process.
    for _ in range(30):
        capsys.readouterr()
        if main(["smoke", "pd", "-c", str(config), "--json"]) == 0:
            break
        time.sleep(5)
    else:
        pytest.fail("smoke did not pass after decode's restart")
    assert main(["down", "pd", "-c", str(config)]) == 0


@pytest.mark.timeout(900)
def test_tp4_on_the_real_engine_serves_and_smokes(tmp_path, project, capsys):
    port = free_port()
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {port}\n")
    assert main(["launch", "tp4", "-c", str(config), *LAUNCH]) == 0
    report = _smoke(config, "tp4", capsys)
    assert all(s["ok"] for s in report["steps"]), report["steps"]
    assert any(a.get("answer") and "Paris" in a["answer"] for a in report["answers"])
    assert main(["down", "tp4", "-c", str(config)]) == 0
