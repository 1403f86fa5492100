"""Faults on the rehearsal, through the driver: a decode worker SIGKILLed from the host mid-benchmark is reported,
restarted by its restart policy, the next smoke test passes, and every request of the interrupted
benchmark is accounted for as a success or an error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from bundle.stack import runstate
from bundle.cli import main
from bundle.targets.registry import stack_of
from tests.conftest import REPO, write_config
from tests.e2e.host_faults import sigkill
from tests.sim_process import free_port

# Each test launches its own rehearsal (it breaks or takes down its stack): the image first.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("rehearsal_image"),
              pytest.mark.timeout(600)]

STATS = ["curl", "-fsS", "-m", "5", "http://127.0.0.1:30000/sim/stats"]


@pytest.fixture
def project(runs_dir):
    name = f"fault-{uuid.uuid4().hex[:6]}"
    yield name
    subprocess.run(["docker", "compose", "-p", f"{name}-pd", "down", "-v", "--remove-orphans"],
                   capture_output=True)


def _status(config, capsys) -> dict:
    capsys.readouterr()
    assert main(["status", "pd", "-c", str(config), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _decode(status: dict) -> dict:
    return next(c for c in status["containers"] if c["service"] == "decode")


# 74 s (2026-12-03, beside the other formerly heavy tests on two workers).
def test_decode_killed_mid_benchmark_is_reported_restarted_and_accounted_for(tmp_path, project, capsys):
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {free_port()}\n"
                                    f"bench:\n  level_timeout: 6m\n")
    assert main(["launch", "pd", "--rehearsal", "sim", "-c", str(config), "--sim", "SIM_TPOT_MS=40"]) == 0
    stack = stack_of(runstate.load(f"{project}-pd"))

    # The benchmark runs as its own process, as a user's would: its lines go to its own log, so they
    # never mix into the `status --json` output read below.
    log = tmp_path / "bench.log"
    with log.open("w") as out:
        runner = subprocess.Popen(
            [sys.executable, "-m", "bundle", "bench", "pd", "-c", str(config), "--concurrency", "4",
             "--prompts-per-concurrency", "4", "--output-len", "48", "--input-len", "32", "--range-ratio", "1.0"],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ})
    try:
        deadline = time.monotonic() + 300  # bench_serving's container takes a while to import on 2 cores
        while True:
            # bench_serving sends one warm-up request first (a failure there aborts the whole run):
            # strike once it and a first wave are done and measured requests are in flight.
            stats = json.loads(stack.exec("decode", STATS))
            if (stats["requests_done"] or 0) >= 1 + 4 and stats["running"] >= 2:  # warm-up + a first wave
                break
            assert time.monotonic() < deadline, f"the benchmark never got going on decode: {stats}"
            time.sleep(0.3)

        # Decode's server process SIGKILLed from the host mid-generation (as the OOM killer would).
        sigkill(f"{project}-pd", "decode")
        killed = time.monotonic()
        while True:  # the driver reports it within 30 s
            decode = _decode(_status(config, capsys))
            if decode["restarts"] >= 1 or decode["state"] != "running":
                break
            assert time.monotonic() - killed < 30, f"status still shows decode as {decode}"
            time.sleep(1)
        reported_after = time.monotonic() - killed
        assert reported_after < 30

        code = runner.wait(timeout=600)
    finally:
        if runner.poll() is None:  # a failed check above leaves no benchmark behind
            runner.kill()
    assert code != 0, log.read_text()[-3000:]  # the interrupted run says it failed...
    history = (tmp_path / "runs" / f"{project}-pd" / "bench.jsonl").read_text().splitlines()
    (level,) = json.loads(history[-1])["levels"]
    completed = (level["metrics"] or {}).get("completed", 0)
    # ...and every one of its requests is a success or an error, none lost.
    assert completed + level["failed_requests"] == level["num_prompts"] == 16
    assert level["failed_requests"] >= 1

    # The restart policy (on-failure) brings decode back; the router pairs it again; smoke passes.
    deadline = time.monotonic() + 180
    while True:
        status = _status(config, capsys)
        if _decode(status)["health"] == "healthy" and status["front_door"]["serving"]:
            break
        assert time.monotonic() < deadline, f"decode never came back: {_decode(status)}"
        time.sleep(2)
    assert _decode(status)["restarts"] >= 1
    for attempt in range(3):  # the router's circuit breaker may still hold decode for a few seconds
        capsys.readouterr()
        if main(["smoke", "pd", "-c", str(config)]) == 0:
            break
        time.sleep(10)
    else:
        pytest.fail(f"smoke never passed after the restart:\n{capsys.readouterr()}")
    print(f"decode kill reported after {reported_after:.1f} s; {completed} completed, "
          f"{level['failed_requests']} failed of {level['num_prompts']}")
