"""End to end on the rehearsal (tp4: the real compose files, the worker simulator, SGLang's own
bench_serving): the guards reach a running topology. `--sim SIM_REPEAT_TOKEN=1` travels through
the overlay and smoke fails as degenerate; a failing long-prompt path fails the long-prompt step;
launch decides the collectives (safe: no GPU) and records why; attestation shows what `auto`
resolved to; `bench --gate` passes a run like the last and fails one whose TPOT got worse, naming it;
a short soak; then pd answers the smoke prompts as tp4 did (smoke's cross-topology comparison).

Two launches (tp4, then pd), each its own compose project, always torn down (`down -v --remove-orphans`).
"""

from __future__ import annotations

import json
import socket
import uuid

import pytest

from bundle.cli import main
from bundle.config.loader import load_config
from bundle.errors import BundleError
from bundle.stack import runstate
from bundle.targets.registry import stack_of
from tests.conftest import write_config

# Each test launches its own rehearsal (it breaks or takes down its stack): the image first.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("rehearsal_image"),
              pytest.mark.timeout(900)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _knobs(record, **knobs) -> None:
    stack_of(record).exec("server", ["curl", "-fsS", "-X", "POST", "-H", "Content-Type: application/json",
                                   "-d", json.dumps(knobs), "http://127.0.0.1:30000/sim/faults"])


def _latest(project: str, pattern: str) -> dict:
    return json.loads(sorted(runstate.project_dir(project).glob(pattern))[-1].read_text())


# 177 s (2026-12-03, on two workers; 210 s alone 2026-12-02).
def test_guards_on_a_running_rehearsal(tmp_path, runs_dir, capsys):
    project = f"e2e-guards-{uuid.uuid4().hex[:6]}"
    cfg = write_config(tmp_path, f"project: {project}\nnetwork:\n  front_port: {_free_port()}\n")
    dep = load_config(cfg)
    name = dep.project_name("tp4")
    try:
        assert main(["launch", "tp4", "--rehearsal", "sim", "-c", str(cfg), "--sim", "SIM_REPEAT_TOKEN=1"]) == 0
        out = capsys.readouterr().out
        assert "collectives: PCIe-safe" in out and "a rehearsal runs on CPU" in out
        record = runstate.load(name)
        decision = _latest(name, "*-launch/collectives.json")
        assert decision["pcie_safe"] is True and decision["source"] == "fallback"
        attestation = _latest(name, "*-launch/attestation.json")
        moe = next(f for f in attestation["findings"] if f["what"] == "MoE runner")
        assert moe["level"] == "OK" and moe["detail"] == "auto -> flashinfer_mxfp4 (SGLang's choice)"

        # The knob came in through the overlay's SIM_* variables: "Paris Paris Paris ..." is caught.
        assert main(["smoke", "tp4", "-c", str(cfg)]) == 1
        smoke = _latest(name, "*-smoke/smoke.json")
        assert [s["name"] for s in smoke["steps"] if not s["ok"]] == ["not degenerate"], smoke["steps"]
        _knobs(record, repeat_token=False, long_prompt_fail=True)
        assert main(["smoke", "tp4", "-c", str(cfg)]) == 1
        smoke = _latest(name, "*-smoke/smoke.json")
        assert [s["name"] for s in smoke["steps"] if not s["ok"]] == ["long prompt (> 64 tokens)"]
        _knobs(record, long_prompt_fail=False)
        assert main(["smoke", "tp4", "-c", str(cfg)]) == 0

        bench = ["bench", "tp4", "-c", str(cfg), "--concurrency", "1", "--input-len", "32", "--output-len", "32",
                 "--prompts-per-concurrency", "4"]
        _knobs(record, ttft_ms=20.0, tpot_ms=10.0)
        assert main(bench) == 0
        assert main([*bench, "--gate", "50"]) == 0
        _knobs(record, tpot_ms=40.0)
        capsys.readouterr()
        assert main([*bench, "--gate", "50"]) == 1
        err = capsys.readouterr().err
        assert "regression gate (50%)" in err and "TPOT (mean_tpot_ms)" in err

        # A short soak: round after round until the time is up, every request stamped by the launcher.
        # 20 s: at C=2 and 10 ms a token a round of 8 prompts takes under 2 s, so the 16 completed and a
        # first window (a third of the traffic under a minute) are met several times over (was 50 s).
        _knobs(record, tpot_ms=10.0)
        assert main(["bench", "tp4", "-c", str(cfg), "--soak", "20s", "--concurrency", "2", "--input-len", "32",
                     "--output-len", "32", "--prompts-per-concurrency", "8"]) == 0
        soak = _latest(name, "*-soak/soak.json")
        s = soak["soak"]
        assert soak["ok"] and s["failed"] == 0 and s["completed"] >= 16 and soak["rounds"][0]["status"] == "ok"
        assert s["first_window"]["requests"] > 0 and s["first_window"]["mean_tpot_ms"] is not None
    finally:
        try:
            stack_of(runstate.load(name)).down(volumes=True, timeout=10)
        except BundleError as exc:
            print(f"teardown of {name}: {exc}")

    # The same prompts through pd (router, prefill, decode) give tp4's greedy answers, checked by smoke.
    pd_name = dep.project_name("pd")
    try:
        assert main(["launch", "pd", "--rehearsal", "sim", "-c", str(cfg)]) == 0
        assert main(["smoke", "pd", "-c", str(cfg)]) == 0
        smoke = _latest(pd_name, "*-smoke/smoke.json")
        same = next(s for s in smoke["steps"] if s["name"] == "same answers as tp4")
        assert same["ok"] and "greedy answers identical to tp4" in same["detail"], same
    finally:
        try:
            stack_of(runstate.load(pd_name)).down(volumes=True, timeout=10)
        except BundleError as exc:
            print(f"teardown of {pd_name}: {exc}")
