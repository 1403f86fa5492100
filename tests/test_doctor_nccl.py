"""P2P decided per host: the NCCL probe script (run for real: without a GPU its workers fail and its
hang bound kills them), its parser on probe outputs (tests/data/nccl), the decision, the doctor
check's verdict, and launch's decision without a GPU. The probe on real GPUs is marked `gpu`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bundle.config.levers import Collectives
from bundle.config.loader import load_config
from bundle.doctor import checks_nccl, collectives, nccl_check, nvidia_smi
from bundle.findings import Level
from tests.conftest import require_module, write_config

DATA = Path(__file__).parent / "data" / "nccl"
SMI = Path(__file__).parent / "data" / "nvidia_smi"
GPUS = (0, 1, 2, 3)


def run_of(name: str, p2p: str, gpus=GPUS) -> nccl_check.NcclRun:
    return nccl_check.interpret((DATA / name).read_text(), gpus=gpus, p2p=p2p, where="sample")


def _levers(tmp_path, value: str):
    return load_config(write_config(tmp_path, f"levers:\n  pcie_safe_collectives: {value}\n")).levers


# ---- the parser ----------------------------------------------------------------------------------

def test_a_p2p_run_reads_bandwidth_transport_and_peer_access():
    run = run_of("pcie_p2p_on_ok.txt", "on")
    assert run.ok and not run.hung and run.kinds == {"P2P"}
    assert run.transports == ["P2P/CUMEM/read"] and run.busbw_gbps == pytest.approx(21.37)
    assert run.peer_access["0->3"] is True and run.nccl_version == "2.27.7"
    off = run_of("pcie_p2p_off_ok.txt", "off")
    assert off.ok and off.kinds == {"SHM"} and off.busbw_gbps == pytest.approx(14.89)


def test_a_hung_run_is_a_hang_not_a_pass():
    run = run_of("pcie_p2p_on_hung.txt", "on")
    assert not run.ok and run.hung and "hung" in run.describe()


def test_output_without_a_result_line_is_a_crash():
    run = nccl_check.interpret("Segmentation fault (core dumped)\n", gpus=GPUS, p2p="on", where="x")
    assert not run.ok and "no result line" in run.error


def test_missing_ranks_fail_the_run():
    text = (DATA / "pcie_p2p_on_ok.txt").read_text().splitlines()
    dropped = "\n".join(line for line in text if '"rank": 3' not in line)
    run = nccl_check.interpret(dropped, gpus=GPUS, p2p="on", where="x")
    assert not run.ok and "3 of 4 ranks reported" in run.error


# ---- the decision -------------------------------------------------------------------------------

def test_p2p_that_works_and_is_faster_is_chosen():
    decision = nccl_check.decide({"prefill": {"on": run_of("pcie_p2p_on_ok.txt", "on"),
                                              "off": run_of("pcie_p2p_off_ok.txt", "off")}})
    assert decision.pcie_safe is False and decision.source == "probe"
    assert "prefill: with P2P 21.4 GB/s" in decision.reason and "without 14.9 GB/s" in decision.reason
    assert decision.evidence["groups"]["prefill"]["on"]["transports"] == ["P2P/CUMEM/read"]


def test_a_p2p_hang_on_one_group_makes_the_host_pcie_safe():
    decision = nccl_check.decide({
        "prefill": {"on": run_of("pcie_p2p_on_ok.txt", "on"), "off": run_of("pcie_p2p_off_ok.txt", "off")},
        "decode": {"on": run_of("pcie_p2p_on_hung.txt", "on", (4, 5, 6, 7)),
                   "off": run_of("pcie_p2p_off_ok.txt", "off", (4, 5, 6, 7))}})
    assert decision.pcie_safe is True and decision.source == "probe"
    assert "decode (GPUs 4,5,6,7): all-reduce with P2P hung" in decision.reason
    assert "without P2P it 14.9 GB/s" in decision.reason


def test_p2p_slower_than_shared_memory_is_not_chosen():
    slow = run_of("pcie_p2p_on_ok.txt", "on")
    slow.busbw_gbps = 3.0
    decision = nccl_check.decide({"tp4": {"on": slow, "off": run_of("pcie_p2p_off_ok.txt", "off")}})
    assert decision.pcie_safe is True and "P2P is slower (3.0 GB/s)" in decision.reason


def test_nothing_probed_is_the_safe_fallback():
    assert nccl_check.decide({}) == Collectives(True, "fallback", "no GPU group was probed: the safe setting",
                                                {"groups": {}, "links": {}})


# ---- the doctor check's verdict -------------------------------------------------------------------

def test_the_check_fails_when_nccl_fails_even_without_p2p():
    broken = nccl_check.interpret("boom\n", gpus=GPUS, p2p="off", where="x")
    result = checks_nccl.judge({"tp4": {"on": run_of("pcie_p2p_on_hung.txt", "on"), "off": broken}}, {}, "auto")
    assert result.status is Level.FAIL and "fails even with P2P off" in result.summary


def test_the_check_warns_when_the_config_forces_p2p_where_it_hangs():
    runs = {"tp4": {"on": run_of("pcie_p2p_on_hung.txt", "on"), "off": run_of("pcie_p2p_off_ok.txt", "off")}}
    assert checks_nccl.judge(runs, {}, False).status is Level.WARN
    auto = checks_nccl.judge(runs, {}, "auto")
    assert auto.status is Level.OK and auto.summary.startswith("auto chooses the PCIe-safe setting")
    assert auto.details["decision"]["pcie_safe"] is True


def test_the_doctor_check_skips_without_a_gpu(monkeypatch):
    from bundle.doctor.context import HostContext

    monkeypatch.setenv("PATH", "/nonexistent")
    result = checks_nccl.nccl_allreduce(HostContext(gpu_groups={"tp4": GPUS}))
    assert result.status is Level.SKIP and "no GPU here" in result.summary


# ---- what launch decides -----------------------------------------------------------------------

def test_forced_values_are_not_probed(tmp_path):
    for value, safe in (("true", True), ("false", False)):
        decision = collectives.decide_for_host(_levers(tmp_path, value), {"tp4": GPUS}, image=None,
                                               probe=lambda g: pytest.fail("probed"))
        assert decision.pcie_safe is safe and decision.source == "forced"


def test_auto_without_a_gpu_takes_the_safe_setting_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi, as on this CPU machine
    decision = collectives.decide_for_host(_levers(tmp_path, "auto"), {"tp4": GPUS}, image=None)
    assert decision.pcie_safe is True and decision.source == "fallback"
    assert "no GPU facts here" in decision.reason and "nvidia-smi is not on PATH" in decision.reason
    rehearsal = collectives.decide_for_host(_levers(tmp_path, "auto"), {"tp4": GPUS}, image=None, rehearsal=True)
    assert rehearsal.pcie_safe is True and "rehearsal" in rehearsal.reason


def test_auto_with_probe_results_decides_from_them_with_the_topology_as_evidence(tmp_path, monkeypatch):
    topo = nvidia_smi.parse_topology((SMI / "rtxpro6000x8_topo.txt").read_text())
    monkeypatch.setattr(nvidia_smi, "query_topology", lambda: topo)
    runs = {"prefill": {"on": run_of("pcie_p2p_on_ok.txt", "on"), "off": run_of("pcie_p2p_off_ok.txt", "off")}}
    decision = collectives.decide_for_host(_levers(tmp_path, "auto"), {"prefill": GPUS}, image=None,
                                           probe=lambda groups: runs)
    assert decision.pcie_safe is False and decision.evidence["links"]["prefill"][0].startswith("0-1 ")


def test_the_decision_reaches_the_rendered_flags_and_environment(tmp_path, runs_dir):
    from tests.conftest import render_for

    dep = load_config(write_config(tmp_path, "levers:\n  pcie_safe_collectives: auto\n"))
    p2p = render_for(dep, "pd", collectives=Collectives(False, "probe", "P2P works"))
    safe = render_for(dep, "pd")  # no decision: auto renders the safe setting
    assert p2p.env["NCCL_P2P_DISABLE"] == "0" and "--disable-custom-all-reduce" not in p2p.server_args("decode")
    assert safe.env["NCCL_P2P_DISABLE"] == "1" and "--disable-custom-all-reduce" in safe.server_args("decode")
    assert safe.collectives.source == "fallback"


# ---- the probe script itself ------------------------------------------------------------------

def _probe(*args, timeout=120):
    proc = subprocess.run([sys.executable, str(nccl_check.PROBE_PATH), *args], capture_output=True,
                          text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_probe_reports_failing_workers_as_data():
    """Run for real: without CUDA every worker fails; the parent still prints its result line."""
    require_module("torch")
    code, output = _probe("--gpus", "0,1", "--timeout", "90")
    run = nccl_check.interpret(output, gpus=(0, 1), p2p="on", where="host")
    if run.ok:
        pytest.skip("this machine has two working GPUs (the gpu test covers it)")
    assert code == 0 and not run.hung and run.error and "rank" in run.error


def test_the_hang_bound_kills_every_worker():
    """Workers that outlive the bound (here: still importing torch after 0.3 s) are killed, and the
    run is a hang."""
    require_module("torch")
    code, output = _probe("--gpus", "0,1", "--timeout", "0.3")
    run = nccl_check.interpret(output, gpus=(0, 1), p2p="on", where="host")
    assert code == 0 and run.hung and not run.ok and "within 0.3 s" in run.error


@pytest.mark.gpu
def test_a_real_all_reduce_over_two_gpus_with_p2p_on_and_off():
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    for p2p in ("on", "off"):
        _, output = _probe("--gpus", "0,1", "--p2p", p2p, "--timeout", "120", timeout=300)
        run = nccl_check.interpret(output, gpus=(0, 1), p2p=p2p, where="host")
        assert run.ok, output[-3000:]
        assert run.busbw_gbps and run.busbw_gbps > 0 and run.transports
        if p2p == "off":
            assert "P2P" not in run.kinds


# ---- outputs captured on a real GPU (tests/data/nccl/README.md) -------------------------------------

def test_captured_one_gpu_runs_pass_with_nccls_real_log():
    for p2p in ("on", "off"):
        run = run_of(f"captured_h200x1_gpus0_p2p_{p2p}.txt", p2p, gpus=(0,))
        assert run.ok and not run.hung and run.nccl_version == "2.28.9", run.error
        assert run.transports == []  # one rank: NCCL's channels name no peer
    assert "NCCL_P2P_DISABLE set by environment to 1" in (DATA / "captured_h200x1_gpus0_p2p_off.txt").read_text()


def test_captured_cuda_error_of_a_rank_is_the_runs_error():
    run = run_of("captured_h200x1_gpus0_0_p2p_on.txt", "on", gpus=(0, 0))
    assert not run.ok and not run.hung
    # CUDA_VISIBLE_DEVICES=0,0 is an invalid list: both ranks fail, and the error says so
    assert run.error.startswith("rank 1: RuntimeError") and "invalid device ordinal" in run.error


def test_captured_hang_bound_on_a_real_gpu():
    run = run_of("captured_h200x1_hang_bound.txt", "on", gpus=(0,))
    assert run.hung and not run.ok and "within 1.5 s" in run.error


def test_p2p_without_peer_access_or_unused_by_nccl_is_not_chosen():
    denied = run_of("pcie_p2p_on_ok.txt", "on")
    denied.peer_access = dict(denied.peer_access, **{"1->2": False})
    decision = nccl_check.decide({"tp4": {"on": denied, "off": run_of("pcie_p2p_off_ok.txt", "off")}})
    assert decision.pcie_safe is True and "no peer access between GPUs 1->2" in decision.reason
    via_shm = run_of("pcie_p2p_on_ok.txt", "on")
    via_shm.transports = ["SHM/direct/direct"]
    decision = nccl_check.decide({"tp4": {"on": via_shm, "off": run_of("pcie_p2p_off_ok.txt", "off")}})
    assert decision.pcie_safe is True and "NCCL chose SHM even with P2P allowed" in decision.reason


@pytest.mark.parametrize("topo, gpus, p2p", [("h200x2_topo.txt", (0, 1), True),
                                             ("rtxpro6000x8_topo.txt", GPUS, False)])
def test_with_nothing_to_run_the_probe_in_nvlink_alone_allows_p2p(tmp_path, monkeypatch, topo, gpus, p2p):
    topology = nvidia_smi.parse_topology((SMI / topo).read_text())
    monkeypatch.setattr(nvidia_smi, "query_topology", lambda: topology)
    monkeypatch.setattr(collectives, "where_to_probe", lambda image: None)
    decision = collectives.decide_for_host(_levers(tmp_path, "auto"), {"tp4": gpus}, image=None)
    assert decision.pcie_safe is (not p2p)
    assert ("NVLink between every pair" in decision.reason) is p2p
    if not p2p:
        assert decision.source == "fallback" and "not all joined by NVLink" in decision.reason
