"""`bundle tune tp4 --space FILE` on the simulator rehearsal, a real Docker engine, real router, real bench_serving:
candidates at different SIMULATED speeds (chosen by each server's own parsed arguments), one made
to fail at start and one to hang. Interrupted (SIGINT) after the first candidate, the sweep leaves nothing
running; the rerun resumes without repeating it, ranks the others, records the failure and writes
a bundle.tuned.yaml that `bundle validate` accepts; launched and benchmarked, the tuned config's
table shows its gain over the defaults' run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from bundle.cli import main
from bundle.errors import EXIT_INTERRUPTED
from bundle.rehearsal.shared.env import DEFAULT_KNOBS
from bundle.stack import docker
from tests.conftest import REPO, compose_project, write_config
from tests.e2e.host_faults import interruptible
from tests.sim_process import free_port
from tests.rehearsal_stack import PACE_FLOOR, request_ms

# Each test launches its own rehearsal (it breaks or takes down its stack): the image first.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("rehearsal_image"),
              pytest.mark.timeout(1200)]

# SIMULATED: EAGLE (mtp-light) runs at 0.4x the TPOT; bf16 would be fastest of all, but its server
# refuses to start.
SIM = ["--sim", "SIM_SPEED_RULES=speculative_algorithm=EAGLE:tpot*0.4;kv_cache_dtype=bf16:tpot*0.2;"
                "moe_runner_backend=triton:tpot*0.3",
       "--sim", "SIM_REFUSE_ARGS=kv_cache_dtype=bf16", "--sim", "SIM_HANG_ARGS=moe_runner_backend=triton",
       "--sim", "SIM_LOAD_SECONDS=1"]
SPACE = """\
include_defaults: true
candidates:
  - name: fast
    overrides: {levers: {speculative: mtp-light}}
  - name: broken
    overrides: {levers: {kv_cache_dtype: bf16}}
  - name: hung
    overrides: {levers: {moe_runner: triton}}
"""
OUTPUT_LEN = 12  # every request produces exactly this many tokens (range_ratio 1.0)


@pytest.fixture
def project(runs_dir):
    with compose_project("tunee2e") as name:
        yield name


def _lines(runs_dir, project: str) -> list[dict]:
    path = runs_dir / f"{project}-tp4" / "tune" / "results.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def test_tune_ranks_records_the_failure_resumes_after_sigint_and_writes_a_valid_tuned_config(
        tmp_path, runs_dir, project, capsys):
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {free_port()}\n"
                                    "bench:\n  concurrency: [2]\n  prompts_per_concurrency: 2\n"
                                    f"  input_len: 16\n  output_len: {OUTPUT_LEN}\n  range_ratio: 1.0\n")
    space = write_config(tmp_path, SPACE, name="space.yaml")
    # 90 s: the hung candidate's bound; the broken one's first crash (its traceback) ends its launch.
    command = ["tune", "tp4", "-c", str(config), "--space", str(space), "--rehearsal", "sim", "--launch-timeout", "90s",
               *SIM]

    # 1. A real process, interrupted as soon as the first candidate is recorded.
    log = tmp_path / "first.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bundle", *command], stdout=out, stderr=subprocess.STDOUT,
                                cwd=REPO, env={**os.environ, "BUNDLE_RUNS_DIR": str(runs_dir)},
                                preexec_fn=interruptible)
    try:
        deadline = time.monotonic() + 480
        while time.monotonic() < deadline and not _lines(runs_dir, project) and proc.poll() is None:
            time.sleep(0.5)
        assert _lines(runs_dir, project), f"no candidate finished: {log.read_text()[-3000:]}"
        time.sleep(3)  # into the second candidate's launch
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert code == EXIT_INTERRUPTED, text[-3000:]
    assert "interrupted" in text and "Run the same command again to resume" in " ".join(text.split())
    assert docker.project_containers(f"{project}-tp4") == [], "the interrupted sweep left containers"
    first = _lines(runs_dir, project)
    assert [line["name"] for line in first] == ["defaults"] and first[0]["status"] == "ok"

    # 2. The rerun resumes: the defaults are not launched again.
    assert main(command) == 0
    out = capsys.readouterr().out
    assert "resumed: not run again" in out
    lines = _lines(runs_dir, project)
    assert [line["name"] for line in lines] == ["defaults", "fast", "broken", "hung"]
    broken, hung = lines[2], lines[3]
    assert broken["status"] == "failed" and broken["phase"] == "launch" and broken["reason"]
    assert hung["status"] == "timeout" and hung["phase"] == "launch" and "not ready after 90 s" in hung["reason"]
    assert docker.project_containers(f"{project}-tp4") == []

    sweep = json.loads(sorted((runs_dir / f"{project}-tp4").glob("*-tune/sweep.json"))[-1].read_text())
    ranked = [c["name"] for c in sweep["candidates"]]
    assert ranked == ["fast", "defaults", "broken", "hung"], ranked  # the two fastest on paper never served
    fast, defaults = sweep["candidates"][0], sweep["candidates"][1]
    # The gain is paced at 2.5x (0.4x the TPOT), but the two were measured minutes apart under
    # whatever else the box ran, so their ratio has no upper bound here (3.5x was seen in CI when the
    # defaults ran beside an engine test). What load cannot do is make a simulator finish a request
    # before its pace (tests/rehearsal_stack.py says why the request's time, not the TPOT): each
    # candidate's requests take at least PACE_FLOOR of what its own rules give. That fails if
    # another rule applied too (bf16's 0.2x would put fast's requests at 59 ms, its floor is 89 ms).
    gain = fast["score"] / defaults["score"]
    print(f"tune: fast scored {gain:.2f}x the defaults (paced: 2.5x)")
    assert gain > 1, gain
    tpot_ms, ttft_ms = float(DEFAULT_KNOBS["SIM_TPOT_MS"]), float(DEFAULT_KNOBS["SIM_TTFT_MS"])
    for candidate, pace_ms in ((defaults, tpot_ms), (fast, tpot_ms * 0.4)):
        (level,) = candidate["levels"]
        paced = request_ms({"mean_ttft_ms": ttft_ms, "mean_tpot_ms": pace_ms}, OUTPUT_LEN)
        assert request_ms(level["metrics"], OUTPUT_LEN) >= PACE_FLOOR * paced, (candidate["name"], paced, level)
    assert "REHEARSAL" in out and "SIMULATED" in out
    assert sorted((runs_dir / f"{project}-tp4").glob("*-tune/tune.png"))

    tuned = tmp_path / "bundle.tuned.yaml"
    body = tuned.read_text()
    assert "speculative: mtp-light" in body and "levers.speculative: mtp-light" in body
    assert f"--against {defaults['bench_run_id']}" in body and "SIMULATED" in body
    assert main(["validate", "tp4", "-c", str(tuned)]) == 0

    # 3. The tuned config, launched and benchmarked: the table shows the gain over the defaults' run.
    capsys.readouterr()
    assert main(["launch", "tp4", "--rehearsal", "sim", "-c", str(tuned), *SIM]) == 0
    try:
        assert main(["bench", "-c", str(tuned), "--against", defaults["bench_run_id"]]) == 0
        out = capsys.readouterr().out
        rows = [row for row in out.splitlines() if f"run {defaults['bench_run_id']} (tune defaults)" in row
                and "output_throughput" in row]
        assert rows and re.search(r"\+\d+\.\d%", rows[0]), out[-3000:]  # more throughput than the defaults
    finally:
        assert main(["down", "tp4", "-c", str(tuned)]) == 0
