"""pd on a REAL Slurm cluster (slurmctld + two slurmd nodes in containers, Debian's Slurm 22.05 and
MUNGE) through the driver: `bundle launch pd --target slurm --rehearsal sim` runs one job on two
nodes (prefill on one, decode on the other, the router in front on the first); smoke proves the PD
path across the hosts, a short bench runs; then node-2's container is SIGKILLed from the host during
a bench (a crash, not `docker kill`), Slurm marks the node down, the driver reports decode as lost,
every request of the bench is accounted for, and `bundle down` leaves no job and no container.
The simulator stands in for the workers here: CI time (the engine pd on Slurm: docs/slurm.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid

import pytest

from bundle.cli import main
from bundle.targets.slurm import job as jobs
from bundle.stack import docker, engine, runstate
from bundle.targets.registry import stack_of
from tests.conftest import write_config
from tests.sim_process import free_port

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("rehearsal_image"), pytest.mark.timeout(900)]

STATS = ["curl", "-fsS", "-m", "5", "http://127.0.0.1:30000/sim/stats"]


@pytest.fixture
def project(runs_dir):
    name = f"slurm-{uuid.uuid4().hex[:6]}"
    yield name
    # Whatever the test left: the cluster's compose project.
    subprocess.run(["docker", "compose", "-p", f"{name}-pd-slurm", "down", "-v", "--remove-orphans", "-t", "1"],
                   capture_output=True)


def _status(config, capsys) -> dict:
    capsys.readouterr()
    assert main(["status", "pd", "-c", str(config), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_pd_on_slurm_serves_is_benchmarked_survives_a_lost_node_report_and_leaves_nothing(tmp_path, project, capsys):
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {free_port()}\n"
                                    f"bench:\n  level_timeout: 5m\n")
    started = time.monotonic()
    assert main(["launch", "pd", "--target", "slurm", "--rehearsal", "sim", "-c", str(config),
                 "--sim", "SIM_TPOT_MS=40"]) == 0
    launched = time.monotonic() - started
    record = jobs.load(f"{project}-pd-slurm")
    client = record.client
    # squeue: one job on two nodes; prefill and decode on different nodes, the router on the first.
    fields = client.job(record.job_id)
    assert fields["JobState"] == "RUNNING" and fields["NumNodes"] == "2"
    steps = client.steps(record.job_id)
    assert steps["prefill"] == "node-1" and steps["decode"] == "node-2" and steps["router"] == "node-1"
    print(client.queue(record.job_id))

    assert main(["smoke", "pd", "-c", str(config)]) == 0  # the PD path proven across the two hosts
    assert main(["bench", "pd", "-c", str(config), "--concurrency", "2", "--prompts-per-concurrency", "2",
                 "--input-len", "16", "--output-len", "8", "--range-ratio", "1.0"]) == 0

    stack = stack_of(runstate.load(f"{project}-pd-slurm"))
    outcome: dict = {}

    def bench():
        outcome["code"] = main(["bench", "pd", "-c", str(config), "--concurrency", "4",
                                "--prompts-per-concurrency", "4", "--output-len", "48",
                                "--input-len", "32", "--range-ratio", "1.0"])

    before = int(json.loads(stack.exec("decode", STATS))["requests_done"] or 0)
    runner = threading.Thread(target=bench, daemon=True)
    runner.start()
    deadline = time.monotonic() + 240
    while True:  # strike once the warm-up and a first wave are done and requests are in flight
        stats = json.loads(stack.exec("decode", STATS))
        if (stats["requests_done"] or 0) >= before + 1 + 4 and stats["running"] >= 2:
            break
        assert time.monotonic() < deadline, f"the benchmark never got going on decode: {stats}"
        time.sleep(0.3)
    # node-2's init (its slurmd, PID 1 of the container) SIGKILLed from the host: the node crashes.
    node2 = f"{project}-pd-slurm-node-2-1"
    os.kill(engine.client().container.inspect(node2).state.pid, signal.SIGKILL)
    killed = time.monotonic()

    runner.join(timeout=600)
    assert not runner.is_alive()
    assert outcome["code"] != 0
    history = (tmp_path / "runs" / f"{project}-pd-slurm" / "bench.jsonl").read_text().splitlines()
    (level,) = json.loads(history[-1])["levels"]
    completed = (level["metrics"] or {}).get("completed", 0)
    assert completed + (level["failed_requests"] or 0) + level.get("unsent", 0) == level["num_prompts"] == 16
    assert (level["failed_requests"] or 0) + level.get("unsent", 0) >= 1

    while True:  # Slurm's own view: the node is DOWN (not responding)
        state, reason = client.nodes(["node-2"])["node-2"]
        if state.startswith("down"):
            break
        assert time.monotonic() - killed < 90, f"node-2 is still {state}"
        time.sleep(1)
    marked_down = time.monotonic() - killed
    roles = {c["service"]: c for c in _status(config, capsys)["containers"]}
    assert roles["decode"]["state"] == "lost" and "node-2" in roles["decode"]["health"]
    assert roles["prefill"]["state"] == "running" and roles["router"]["state"] == "running"

    capsys.readouterr()
    assert main(["down", "-c", str(config)]) == 0
    said = capsys.readouterr().out
    # The cluster goes whole, volumes included: down must not claim to have kept a cache volume.
    assert "removed" in said and "kept" not in said, said
    assert docker.project_volumes(f"{project}-pd-slurm") == []
    assert docker.project_containers(f"{project}-pd-slurm") == [] and docker.project_networks(f"{project}-pd-slurm") == []
    print(f"launched in {launched:.0f} s; node-2 marked down {marked_down:.0f} s after the kill ({reason}); "
          f"{completed} completed, {level['failed_requests']} failed of {level['num_prompts']}")
