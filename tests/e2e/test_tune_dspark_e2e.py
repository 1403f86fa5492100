"""`bundle tune` with dspark in its space, on the simulator rehearsal (real router, real bench_serving,
real containers): for tp4 the DSpark candidate is launched, attested (the block size the simulated
server resolved from the 0731-shaped simulated model), benchmarked and ranked against the defaults at
a SIMULATED speed; for pd it is skipped before any launch, naming sglang #33083."""

from __future__ import annotations

import json

import pytest

from bundle.cli import main
from bundle.stack import docker
from tests.conftest import compose_project, write_config
from tests.sim_process import free_port

pytestmark = pytest.mark.docker

# SIMULATED: a DSPARK server decodes at 0.4x the TPOT; nothing here measures DSpark.
# A 30 ms TPOT over 64 output tokens: decode (about 1.9 s against 0.8 s) outweighs the TTFT's noise on a
# loaded 2-core host (58 ms against 130 ms in one run, enough to reverse a 12-token ranking).
SIM = ["--sim", "SIM_SPEED_RULES=speculative_algorithm=DSPARK:tpot*0.4", "--sim", "SIM_LOAD_SECONDS=1",
       "--sim", "SIM_TPOT_MS=30"]
SPACE = "levers:\n  speculative: [dspark]\n"


@pytest.fixture
def project(runs_dir):
    with compose_project("tunedsp") as name:
        yield name


# 90 s (2026-12-03, on two workers; 109 s alone 2026-12-02, dspark 156 against 66 tok/s SIMULATED).
@pytest.mark.timeout(1200)
def test_tune_ranks_dspark_for_tp4_and_skips_it_for_pd_with_the_reason(tmp_path, runs_dir, project, capsys):
    config = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {free_port()}\n"
                                    "bench:\n  concurrency: [2]\n  prompts_per_concurrency: 2\n"
                                    "  input_len: 16\n  output_len: 64\n  range_ratio: 1.0\n")
    space = write_config(tmp_path, SPACE, name="space.yaml")

    assert main(["tune", "pd", "-c", str(config), "--space", str(space), "--rehearsal", "--dry-run", *SIM]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "speculative=dspark" in ln)
    assert "skip: rejected before launch" in line and "sglang #33083" in line and "levers.speculative: mtp" in line

    assert main(["tune", "tp4", "-c", str(config), "--space", str(space), "--rehearsal",
                 "--launch-timeout", "300s", *SIM]) == 0
    assert docker.project_containers(f"{project}-tp4") == []
    sweep = json.loads(sorted((runs_dir / f"{project}-tp4").glob("*-tune/sweep.json"))[-1].read_text())
    ranked = [c["name"] for c in sweep["candidates"]]
    assert ranked == ["speculative=dspark", "defaults"], ranked
    assert sweep["candidates"][0]["score"] > sweep["candidates"][1]["score"] * 1.5
    # The candidate's launch attested what the simulated server resolved: DSPARK, the model's block size.
    attestations = sorted((runs_dir / f"{project}-tp4").glob("*-launch/attestation.json"))
    found = [f for path in attestations for f in json.loads(path.read_text())["findings"]
             if f["what"] == "speculative decoding" and f["detail"].startswith("dspark:")]
    assert found and found[0]["level"] == "OK" and "block size 7 (verify window 8" in found[0]["detail"]
