"""End to end on the rehearsal (real containers, the real router (smg), SGLang's own bench_serving,
worker simulators): attestation reads what runs, smoke passes, smoke fails with the reason when the
simulator answers wrongly, and bench measures what the simulator was told to do.

One test per topology, each with its own compose project, always torn down (`down -v
--remove-orphans`). Kept to two launches: CI has 2 cores.
"""

from __future__ import annotations

import json
import socket
import uuid

import pytest

from bundle.verify import attest
from bundle.render import rehearsal
from bundle.verify import report
from bundle.stack import runstate
from bundle.cli import main
from bundle.config.loader import load_config
from bundle.errors import BundleError
from tests.conftest import render_for, write_config

pytestmark = pytest.mark.docker

# What the simulator is told for the benchmark. Decode time (63 x 20 ms) dominates each request, so
# the router's and the PD bootstrap's few tens of ms stay well inside the 20% the check allows.
TTFT_MS, TPOT_MS, OUT_LEN = 100.0, 20.0, 64
# Each level is a fresh bench_serving container (tens of seconds to import on 2 cores): few levels.
LEVELS = {"tp4": [1, 2], "pd": [2]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def launched(tmp_path, runs_dir):
    """`bundle launch <topology> --rehearsal` under its own project; always `down -v --remove-orphans`."""
    made = []

    def launch(topology: str):
        project = f"e2e-{topology}-{uuid.uuid4().hex[:6]}"
        cfg = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {_free_port()}\n")
        dep = load_config(cfg)
        made.append(dep.project_name(topology))
        assert main(["launch", topology, "--rehearsal", "sim", "-c", str(cfg)]) == 0
        return cfg, dep, runstate.load(dep.project_name(topology))

    yield launch
    for project in made:
        try:
            runstate.load(project).stack().down(volumes=True, timeout=10)  # down -v --remove-orphans
        except BundleError as exc:  # the test's own failure is the one to report
            print(f"teardown of {project}: {exc}")


def set_knobs(record, topology: str, **knobs) -> None:
    """The simulator's run-time knobs (POST /sim/faults), inside each worker's container."""
    services = ["server"] if topology == "tp4" else ["prefill", "decode"]
    for service in services:
        record.stack().exec(service, ["curl", "-fsS", "-X", "POST", "-H", "Content-Type: application/json",
                                      "-d", json.dumps(knobs), "http://127.0.0.1:30000/sim/faults"])


def latest_smoke(project: str) -> dict:
    paths = sorted(runstate.project_dir(project).glob("*-smoke/smoke.json"))
    return json.loads(paths[-1].read_text())


def check_attestation(dep, topology, record):
    saved = json.loads(max(runstate.project_dir(record.project).glob("*-launch/attestation.json"))
                       .read_text())
    assert saved["ok"] and {r["role"] for r in saved["records"]} == set(attest.expectations(dep, topology))
    # The same render the launch made (a rehearsal: the safe collectives), read from its stack.
    result = attest.attest(dep, render_for(dep, topology, rehearsal=True), stack=record.stack())
    assert result.ok, result.to_json()
    for rec in result.records:
        assert rec.simulated and rec.error is None
        # Read from the server process itself, inside its container.
        assert rec.env_source.startswith("/proc/1/environ") and rec.env["NCCL_P2P_DISABLE"] == "1"
    levels = {(f.role, f.what): f.level for f in result.findings}
    assert all(levels[(r.role, "CUDA graphs")] == "OK" for r in result.records)


def check_smoke(cfg, topology, record, capsys):
    assert main(["smoke", topology, "-c", str(cfg)]) == 0
    data = latest_smoke(record.project)
    assert data["ok"] and data["topology"] == topology
    if topology == "pd":
        step = next(s for s in data["steps"] if s["name"] == "through prefill and decode")
        assert "prefill counted" in step["detail"] and "decode counted" in step["detail"], step
    set_knobs(record, topology, wrong_answers=True)
    capsys.readouterr()
    try:
        assert main(["smoke", topology, "-c", str(cfg)]) == 1
    finally:
        set_knobs(record, topology, wrong_answers=False)
    err = capsys.readouterr().err
    assert "smoke test of" in err and "answer" in err and "'Paris'" in err and "Lyon" in err
    assert not latest_smoke(record.project)["ok"]


def check_bench(cfg, topology, record):
    set_knobs(record, topology, ttft_ms=TTFT_MS, tpot_ms=TPOT_MS)
    levels = [str(c) for c in LEVELS[topology]]
    assert main(["bench", topology, "-c", str(cfg), "--concurrency", *levels, "--input-len", "64",
                 "--output-len", str(OUT_LEN), "--prompts-per-concurrency", "3", "--range-ratio", "1.0",
                 "--level-timeout", "3m", "--label", "e2e"]) == 0
    history = report.read_jsonl(runstate.project_dir(record.project) / report.BENCH_HISTORY)
    assert len(history) == 1
    line = history[0]
    assert line["lock_hash"] and line["image"]["id"] and line["driver_version"] == "none (rehearsal)"
    assert [lv["concurrency"] for lv in line["levels"]] == LEVELS[topology]
    for level in line["levels"]:
        m, c = level["metrics"], level["concurrency"]
        assert level["status"] == "ok" and m["completed"] == 3 * c and level["failed_requests"] == 0
        want = rehearsal.expected_bench(ttft_ms=TTFT_MS, tpot_ms=TPOT_MS, output_lens=[OUT_LEN] * 3 * c,
                                        concurrency=c)
        for key in ("mean_tpot_ms", "output_throughput"):
            assert m[key] == pytest.approx(want[key], rel=0.2), (c, key, m[key], want[key])
        # TTFT carries the router's and (pd) the KV bootstrap's hops on top: never below what was set.
        assert m["mean_ttft_ms"] >= 0.95 * TTFT_MS, m["mean_ttft_ms"]
    run_dir = runstate.project_dir(record.project) / line["run_id"]
    assert (run_dir / "bench.png").is_file()
    assert (run_dir / f"c{LEVELS[topology][0]}.jsonl").is_file()


def test_tp4_rehearsal_attest_smoke_and_bench(launched, capsys):
    cfg, dep, record = launched("tp4")
    check_attestation(dep, "tp4", record)
    check_smoke(cfg, "tp4", record, capsys)
    check_bench(cfg, "tp4", record)


def test_pd_rehearsal_attest_smoke_and_bench(launched, capsys):
    cfg, dep, record = launched("pd")
    check_attestation(dep, "pd", record)
    check_smoke(cfg, "pd", record, capsys)
    check_bench(cfg, "pd", record)
