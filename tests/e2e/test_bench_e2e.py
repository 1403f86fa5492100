"""bench on the rehearsal, through the driver: every request accounted for in every ending.
The high-concurrency run reads the session's shared tp4 rehearsal; `down` during a bench has its own.

- C=64 x 4 sends all 256 prompts (the rehearsal's dataset holds enough), and a level the dataset
  cannot supply fails before sending, saying so and how to fix it;
- `bundle down` while `bundle bench` runs: the run says the stack went away, counts completed,
  failed and never-sent requests that add up to the prompts asked for, and prints no traceback;
- written to a file, the bench output keeps every number whole.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from pathlib import Path

from bundle.cli import main
from bundle.stack import docker, runstate
from bundle.verify import runstore
from tests.conftest import compose_project, write_config
from tests.e2e.conftest import sim_knobs
from tests.sim_process import free_port

# Each test launches its own rehearsal (it breaks or takes down its stack): the image first.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("rehearsal_image"),
              pytest.mark.timeout(600)]


@pytest.fixture
def project(runs_dir):
    with compose_project("benche2e") as name:
        yield name


def _last_run(history: Path) -> dict:
    return json.loads(history.read_text().splitlines()[-1])


@pytest.mark.timeout(600)
def test_high_concurrency_sends_every_prompt_and_a_too_small_dataset_is_refused(tmp_path, shared_rehearsal):
    shared = shared_rehearsal("tp4")  # read only: tests/e2e/conftest.py's session launch
    config, history = shared.config, runstate.project_dir(shared.project) / runstore.BENCH_HISTORY
    out_file = tmp_path / "bench.out"
    with sim_knobs(shared, tpot_ms=2, ttft_ms=5):
        # A separate process writing to a file, as `make rehearse > log` or CI does: no terminal.
        with out_file.open("w") as fh:
            code = subprocess.run([sys.executable, "-m", "bundle", "bench", "-c", str(config),
                                   "--concurrency", "64", "--prompts-per-concurrency", "4", "--input-len", "32",
                                   "--output-len", "8"], stdout=fh, stderr=subprocess.STDOUT).returncode
    text = out_file.read_text()
    assert code == 0, text
    (level,) = _last_run(history)["levels"]
    assert level["metrics"]["completed"] == 256 and level["failed_requests"] == 0 and level["unsent"] == 0
    assert "…" not in text, "a number was cut short in the log"
    assert f"{level['metrics']['output_throughput']:.2f}" in text

    # 1024 conversations in the dataset: 2048 prompts cannot be made from it.
    code = main(["bench", "-c", str(config), "--concurrency", "512", "--prompts-per-concurrency", "4",
                 "--input-len", "16", "--output-len", "2"])
    assert code == 1
    (level,) = _last_run(history)["levels"]
    assert "the dataset supplies only" in level["reason"] and "bench.dataset_path" in level["reason"]
    assert level["metrics"]["completed"] + level["failed_requests"] + level["unsent"] == 2048


def test_down_during_bench_leaves_every_request_accounted_for(tmp_path, runs_dir, project, capsys):
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {free_port()}\n")
    assert main(["launch", "tp4", "--rehearsal", "sim", "-c", str(config), "--sim", "SIM_TPOT_MS=40"]) == 0
    outcome = {}

    def bench():
        outcome["code"] = main(["bench", "-c", str(config), "--concurrency", "4", "--prompts-per-concurrency", "8",
                                "--input-len", "32", "--output-len", "48", "--range-ratio", "1.0"])

    runner = threading.Thread(target=bench, daemon=True)
    runner.start()
    progress = None
    deadline = time.monotonic() + 300  # bench_serving's container takes a while to import on 2 cores
    while time.monotonic() < deadline:
        found = sorted((runs_dir / f"{project}-tp4").glob("*-bench/c4.progress.jsonl"))
        if found and len(found[-1].read_text().splitlines()) >= 1 + 4:  # the warm-up and a first wave
            progress = found[-1]
            break
        time.sleep(0.3)
    assert progress is not None, "the benchmark never got going"
    assert main(["down", "-c", str(config)]) == 0
    runner.join(timeout=300)
    assert not runner.is_alive()
    assert outcome["code"] == 1
    (level,) = _last_run(runs_dir / f"{project}-tp4" / runstore.BENCH_HISTORY)["levels"]
    assert "the stack went away during the run" in level["reason"]
    assert level["metrics"]["completed"] >= 4
    assert level["metrics"]["completed"] + level["failed_requests"] + level["unsent"] == level["num_prompts"] == 32
    assert "Traceback" not in capsys.readouterr().err
    assert docker.project_containers(f"{project}-tp4") == []
