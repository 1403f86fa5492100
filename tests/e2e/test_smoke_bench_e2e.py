"""End to end on the rehearsal (real containers, the real router (smg), SGLang's own bench_serving,
worker simulators): attestation reads what runs, smoke passes, smoke fails with the reason when the
simulator answers wrongly, and bench measures what the simulator was told to do.

On the session's shared rehearsal of each topology (tests/e2e/conftest.py): these checks only read
the stack, and every knob they turn is put back.
"""

from __future__ import annotations

import json

import pytest

from bundle.verify import attest
from bundle.rehearsal.shared import env as rehearsal
from bundle.verify import runstore
from bundle.stack import runstate
from bundle.cli import main
from bundle.targets.registry import stack_of
from bundle.rehearsal import registry as modes
from tests.conftest import render_for
from tests.e2e.conftest import sim_knobs
from tests.rehearsal_stack import assert_paced

pytestmark = pytest.mark.docker

# What the simulator is told for the benchmark. Decode time (63 x 20 ms) dominates each request, so
# the router's and the PD bootstrap's few tens of ms stay well inside the 20% the check allows.
TTFT_MS, TPOT_MS, OUT_LEN = 100.0, 20.0, 64
# Each level is a fresh bench_serving container (tens of seconds to import on 2 cores): few levels.
LEVELS = {"tp4": [1, 2], "pd": [2]}


def latest_smoke(project: str) -> dict:
    paths = sorted(runstate.project_dir(project).glob("*-smoke/smoke.json"))
    return json.loads(paths[-1].read_text())


def check_attestation(dep, topology, record):
    saved = json.loads(max(runstate.project_dir(record.project).glob("*-launch/attestation.json"))
                       .read_text())
    assert saved["ok"] and {r["role"] for r in saved["records"]} == set(attest.expectations(dep, topology))
    # The same render the launch made (a rehearsal: the safe collectives), read from its stack.
    result = attest.attest(dep, render_for(dep, topology, mode=modes.get("sim")), stack=stack_of(record))
    assert result.ok, result.to_json()
    for rec in result.records:
        assert rec.simulated and rec.error is None
        # Read from the server process itself, inside its container.
        assert rec.env_source.startswith("/proc/1/environ") and rec.env["NCCL_P2P_DISABLE"] == "1"
    levels = {(f.role, f.what): f.level for f in result.findings}
    assert all(levels[(r.role, "CUDA graphs")] == "OK" for r in result.records)


def check_smoke(shared, capsys):
    cfg, topology, record = shared.config, shared.topology, shared.record
    assert main(["smoke", topology, "-c", str(cfg)]) == 0
    data = latest_smoke(record.project)
    assert data["ok"] and data["topology"] == topology
    if topology == "pd":
        step = next(s for s in data["steps"] if s["name"] == "through prefill and decode")
        assert "prefill counted" in step["detail"] and "decode counted" in step["detail"], step
    capsys.readouterr()
    with sim_knobs(shared, wrong_answers=True):
        assert main(["smoke", topology, "-c", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert "smoke test of" in err and "answer" in err and "'Paris'" in err and "Lyon" in err
    assert not latest_smoke(record.project)["ok"]


def check_bench(shared):
    cfg, topology, record = shared.config, shared.topology, shared.record
    history_file = runstate.project_dir(record.project) / runstore.BENCH_HISTORY
    before = len(runstore.read_jsonl(history_file)) if history_file.exists() else 0
    levels = [str(c) for c in LEVELS[topology]]
    with sim_knobs(shared, ttft_ms=TTFT_MS, tpot_ms=TPOT_MS):
        assert main(["bench", topology, "-c", str(cfg), "--concurrency", *levels, "--input-len", "64",
                     "--output-len", str(OUT_LEN), "--prompts-per-concurrency", "3", "--range-ratio", "1.0",
                     "--level-timeout", "3m", "--label", "e2e"]) == 0
    history = runstore.read_jsonl(history_file)
    assert len(history) == before + 1  # this run added exactly one line
    line = history[-1]
    assert line["lock_hash"] and line["image"]["id"] and line["driver_version"] == "none (rehearsal)"
    assert [lv["concurrency"] for lv in line["levels"]] == LEVELS[topology]
    for level in line["levels"]:
        m, c = level["metrics"], level["concurrency"]
        assert level["status"] == "ok" and m["completed"] == 3 * c and level["failed_requests"] == 0
        want = rehearsal.expected_bench(ttft_ms=TTFT_MS, tpot_ms=TPOT_MS, output_lens=[OUT_LEN] * 3 * c,
                                        concurrency=c)
        assert_paced(m, want, OUT_LEN, f"c{c}")
        # TTFT carries the router's and (pd) the KV bootstrap's hops on top: never below what was set.
        assert m["mean_ttft_ms"] >= 0.95 * TTFT_MS, m["mean_ttft_ms"]
    run_dir = runstate.project_dir(record.project) / line["run_id"]
    assert (run_dir / "bench.png").is_file()
    assert (run_dir / f"c{LEVELS[topology][0]}.jsonl").is_file()


@pytest.mark.timeout(900)  # the shared launch (first use), attestation, two smokes, two bench levels
def test_tp4_rehearsal_attest_smoke_and_bench(shared_rehearsal, capsys):
    shared = shared_rehearsal("tp4")
    check_attestation(shared.dep, "tp4", shared.record)
    check_smoke(shared, capsys)
    check_bench(shared)


@pytest.mark.timeout(900)
def test_pd_rehearsal_attest_smoke_and_bench(shared_rehearsal, capsys):
    shared = shared_rehearsal("pd")
    check_attestation(shared.dep, "pd", shared.record)
    check_smoke(shared, capsys)
    check_bench(shared)
